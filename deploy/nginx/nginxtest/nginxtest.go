// Package nginxtest runs the reference gateway (deploy/nginx's checked-in config) in a test, on
// a real nginx.
package nginxtest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/das-ask/ask/deploy/nginx"
	"github.com/das-ask/ask/internal/loopback"
)

// Start runs nginx on the checked-in config, rendered with upstream as its one server (an
// address, with nginx server parameters after it if wanted), on a free loopback address, and
// returns that address once nginx answers on it. It skips the test when nginx is not
// installed, and stops nginx (its master, which stops its workers) when the test ends.
func Start(tb testing.TB, upstream string) string {
	tb.Helper()
	addr, _ := start(tb, upstream, nil)
	return addr
}

// StartIn is Start, and also returns the directory nginx writes in: its error.log (at warn)
// and its temporary files.
func StartIn(tb testing.TB, upstream string) (addr, dir string) {
	tb.Helper()
	return start(tb, upstream, nil)
}

// tlsExample returns the TLS and HTTP/2 lines that ask.conf's header comment (and
// docs/scale-out.md) tell an operator to put in place of its listen line, for listening on addr
// with the certificate and key in the given files.
func tlsExample(tb testing.TB, addr, cert, key string) string {
	tb.Helper()
	var lines []string
	for _, l := range strings.Split(nginx.Conf, "\n") {
		d, ok := strings.CutPrefix(l, "#     ")
		if !ok || !(strings.HasPrefix(d, "listen 443 ") || strings.HasPrefix(d, "ssl_certificate")) {
			continue
		}
		lines = append(lines, d)
	}
	ex := strings.Join(lines, "\n    ")
	for old, new := range map[string]string{"listen 443 ": "listen " + addr + " ", exampleCert + ";": cert + ";", exampleKey + ";": key + ";"} {
		if strings.Count(ex, old) != 1 {
			tb.Fatalf("ask.conf's TLS example %q has %q %d times, want once", ex, old, strings.Count(ex, old))
		}
		ex = strings.Replace(ex, old, new, 1)
	}
	return ex
}

// The certificate's files in ask.conf's TLS example.
const (
	exampleCert = "/etc/nginx/tls/ask.crt"
	exampleKey  = "/etc/nginx/tls/ask.key"
)

// StartTLS is Start with TLS and HTTP/2 on the gateway's listener, as ask.conf's example has it
// (its header comment, and docs/scale-out.md), with a
// self-signed certificate for 127.0.0.1; it returns the address and a pool that trusts that
// certificate. It skips the test when nginx lacks its ssl or http_v2 module.
func StartTLS(tb testing.TB, upstream string) (string, *x509.CertPool) {
	tb.Helper()
	addr, _, pool := StartTLSIn(tb, upstream)
	return addr, pool
}

// StartTLSIn is StartTLS, and also returns the directory nginx writes in, as StartIn does.
func StartTLSIn(tb testing.TB, upstream string) (addr, dir string, pool *x509.CertPool) {
	tb.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		tb.Skip("nginx not installed (apt-get install -y nginx-light)")
	}
	// nginx -V prints its configure arguments on stderr.
	v, err := exec.Command(bin, "-V").CombinedOutput()
	if err != nil {
		tb.Fatalf("nginx -V: %v: %s", err, v)
	}
	for _, m := range []string{"--with-http_ssl_module", "--with-http_v2_module"} {
		if !bytes.Contains(v, []byte(m)) {
			tb.Skipf("this nginx was built without %s (nginx -V), which TLS and HTTP/2 need", m)
		}
	}
	certs := tb.TempDir()
	certPEM, keyPEM := selfSigned(tb)
	cert, key := filepath.Join(certs, "cert.pem"), filepath.Join(certs, "key.pem")
	if err := os.WriteFile(cert, certPEM, 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(key, keyPEM, 0o600); err != nil {
		tb.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	addr, dir = start(tb, upstream, func(listen string) string {
		return tlsExample(tb, listen, cert, key)
	})
	return addr, dir, pool
}

// selfSigned returns a certificate for 127.0.0.1, valid for a day, and its key, as PEM.
func selfSigned(tb testing.TB) (certPEM, keyPEM []byte) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "ask gateway test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// start runs nginx as Start does, and returns its address and the directory it writes in;
// listenLine, when not nil, gives the listen line (and what goes with it) for the address, in
// place of the rendered `listen <addr>;`.
//
// The address is a pick closed before nginx binds it, which another process may take first:
// nginx then gives up binding it ("Address already in use") and start runs it again on a new
// pick, up to three times. nginx is ready once it has written its pid file, which it does after
// binding its listeners, and answers on the address: a dial alone could reach the process that
// took the port.
func start(tb testing.TB, upstream string, listenLine func(listen string) string) (string, string) {
	tb.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		tb.Skip("nginx not installed (apt-get install -y nginx-light)")
	}
	for attempt := 1; ; attempt++ {
		dir := tb.TempDir()
		listen, err := loopback.Addr()
		if err != nil {
			tb.Fatal(err)
		}
		errLog, taken := run(tb, bin, dir, upstream, listen, listenLine)
		if !taken {
			return listen, dir
		}
		if attempt == 3 {
			tb.Fatalf("nginx could not bind a free address three times; the last: %s", errLog)
		}
	}
}

// run starts nginx in dir on listen and waits until it is ready, or has exited because another
// process holds listen (taken, with its error log). Any other failure ends the test.
func run(tb testing.TB, bin, dir, upstream, listen string, listenLine func(listen string) string) (errLog []byte, taken bool) {
	tb.Helper()
	conf, err := nginx.Render(nginx.Conf, "e", []string{upstream}, listen, 2*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	if listenLine != nil {
		plain := "listen " + listen + ";"
		if strings.Count(conf, plain) != 1 {
			tb.Fatalf("the rendered config has %q %d times, want once", plain, strings.Count(conf, plain))
		}
		conf = strings.Replace(conf, plain, listenLine(listen), 1)
	}
	inc, main := filepath.Join(dir, "ask.conf"), filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(inc, []byte(conf), 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(main, []byte(nginx.Main(dir, 64, inc)), 0o644); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", main, "-e", filepath.Join(dir, "error.log"), "-g", "daemon off;")
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	// exited is closed when nginx has exited, with exitErr its end: read by the wait below and
	// by the cleanup, either of which may come first.
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		// SIGTERM: the master stops its workers, then itself (a SIGKILLed master leaves its
		// workers running, listening, for good).
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	giveUp := time.After(10 * time.Second)
	for {
		if nginx.Bound(dir, cmd.Process.Pid) {
			conn, err := net.DialTimeout("tcp", listen, time.Second)
			if err == nil {
				_ = conn.Close()
				return nil, false
			}
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			if bytes.Contains(b, []byte("Address already in use")) {
				return b, true
			}
			tb.Fatalf("nginx exited: %v: %s", exitErr, b)
		case <-giveUp:
			tb.Fatalf("nginx was not ready on %s within 10s", listen)
		case <-tick.C:
		}
	}
}
