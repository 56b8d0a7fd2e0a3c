package idp

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/golang-jwt/jwt/v5"
)

// Algorithms this IdP signs with.
const (
	RS256 = "RS256"
	ES256 = "ES256"
)

var algs = []string{RS256, ES256}

// signingKey is one private key with its published kid.
type signingKey struct {
	alg    string
	kid    string
	method jwt.SigningMethod
	priv   crypto.Signer
}

func generate(alg string) (crypto.Signer, error) {
	switch alg {
	case RS256:
		return rsa.GenerateKey(rand.Reader, 2048)
	case ES256:
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	return nil, fmt.Errorf("unsupported alg %q: want RS256 or ES256", alg)
}

// newSigningKey wraps priv. The kid is derived from the public key, so a persisted key keeps
// its kid across restarts and two different keys never share one.
func newSigningKey(alg string, priv crypto.Signer) (*signingKey, error) {
	der, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	k := &signingKey{
		alg:  alg,
		kid:  strings.ToLower(alg) + "-" + base64.RawURLEncoding.EncodeToString(sum[:9]),
		priv: priv,
	}
	switch alg {
	case RS256:
		k.method = jwt.SigningMethodRS256
		_, ok := priv.(*rsa.PrivateKey)
		if !ok {
			return nil, errors.New("RS256 needs an RSA key")
		}
	case ES256:
		k.method = jwt.SigningMethodES256
		ec, ok := priv.(*ecdsa.PrivateKey)
		if !ok || ec.Curve != elliptic.P256() {
			return nil, errors.New("ES256 needs a P-256 ECDSA key")
		}
	default:
		return nil, fmt.Errorf("unsupported alg %q", alg)
	}
	return k, nil
}

// keyFile is where the current key for alg persists under dir.
func keyFile(dir, alg string) string { return filepath.Join(dir, strings.ToLower(alg)+".pem") }

// loadOrCreate returns the key for alg persisted in dir, creating and persisting one if there
// is none. With dir == "" the key is fresh and lives in memory only.
func loadOrCreate(dir, alg string) (*signingKey, error) {
	if dir == "" {
		priv, err := generate(alg)
		if err != nil {
			return nil, err
		}
		return newSigningKey(alg, priv)
	}
	path := keyFile(dir, alg)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		priv, err := generate(alg)
		if err != nil {
			return nil, err
		}
		if err := persist(dir, alg, priv); err != nil {
			return nil, err
		}
		return newSigningKey(alg, priv)
	case err != nil:
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s: want a PEM \"PRIVATE KEY\" block (PKCS #8)", path)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	priv, ok := parsed.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: not a signing key", path)
	}
	k, err := newSigningKey(alg, priv)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// The file holds a private key: keep it private even if someone loosened it.
	if err := os.Chmod(path, 0o600); err != nil {
		return nil, err
	}
	return k, nil
}

// persist writes priv as the key for alg, atomically (temp file, then rename), mode 0600.
func persist(dir, alg string, priv crypto.Signer) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+strings.ToLower(alg)+"-*.pem")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // no-op after a successful rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if err := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), keyFile(dir, alg))
}
