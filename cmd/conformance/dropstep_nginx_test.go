package main

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/conformance"
	"github.com/das-ask/ask/demo/stack"
)

// dropFirstStep is a body that relays an event stream without its first step frame.
type dropFirstStep struct {
	src     *bufio.Reader
	body    io.Closer
	pending bytes.Buffer
	dropped bool
}

func (d *dropFirstStep) Read(p []byte) (int, error) {
	for d.pending.Len() == 0 {
		var frame bytes.Buffer
		for {
			line, err := d.src.ReadBytes('\n')
			frame.Write(line)
			if err != nil {
				if frame.Len() > 0 {
					break
				}
				return 0, err
			}
			if len(bytes.TrimRight(line, "\r\n")) == 0 {
				break
			}
		}
		if !d.dropped && bytes.Contains(frame.Bytes(), []byte("\nevent: step\n")) {
			d.dropped = true
			continue
		}
		d.pending.Write(frame.Bytes())
	}
	return d.pending.Read(p)
}

func (d *dropFirstStep) Close() error { return d.body.Close() }

// stepDropper is a reverse proxy in front of target that drops the first step of every event
// stream, live and replayed: the defect the suite once passed (issue 23).
func stepDropper(t *testing.T, target string) string {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: u.Scheme, Host: u.Host})
			r.Out.Host = u.Host
		},
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				resp.Body = &dropFirstStep{src: bufio.NewReader(resp.Body), body: resp.Body}
			}
			return nil
		},
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL + u.Path
}

// Against a service that loses one step per stream, in runs far shorter than its buffer, the
// suite fails through nginx as it does directly: the gap is not taken for eviction, and the
// source's audit line has no step.
func TestADroppedStepFailsThroughTheGateway(t *testing.T) {
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Skip("nginx is not installed (apt-get install -y nginx-light); make conformance-gateway installs it")
	}
	st, err := stack.Start(t.Context(), stack.Options{KeepAlive: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	relay := stepDropper(t, st.AskURL)
	gw, err := startGateway(t.Context(), gatewayOptions{
		nginx: "nginx", template: "../../deploy/nginx/ask.conf", readTimeout: 10 * time.Second,
		upstreams: []string{st.AskURL, relay}, logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := gw.stop(); err != nil {
			t.Error(err)
		}
	})
	checks := []string{"events.seq-gap-free", "audit.every-call-streamed"}
	for _, tt := range []struct {
		name, base string
		want       conformance.Status
	}{
		{"nginx in front of the service", gw.urls[0], conformance.Pass},
		{"nginx in front of the step-dropping relay", gw.urls[1], conformance.Fail},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := conformance.Run(t.Context(), conformance.Config{
				BaseURL: tt.base, Tokens: conformance.IdPTokens{URL: st.IdPURL}, AuditURL: st.SourceURL,
				Only: regexp.MustCompile(`^(` + strings.Join(checks, "|") + `)$`), RunTimeout: 30 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range checks {
				res, ok := rep.Result(name)
				if !ok || res.Status != tt.want {
					t.Errorf("%s: %s %s, want %s", name, res.Status, res.Detail, tt.want)
				}
			}
		})
	}
}
