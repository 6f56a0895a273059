package fleet

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"lvs-feedback/scheduler/fleet/etcdtest"
)

// writeCert issues a certificate for name (server: for 127.0.0.1)
// signed by ca (nil: self-signed CA) and writes cert and key as PEM.
func writeCert(t *testing.T, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, server bool) (*x509.Certificate, *ecdsa.PrivateKey, string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	if ca == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
		ca, caKey = tmpl, key
	} else if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	kb, _ := x509.MarshalECPrivateKey(key)
	cp, kp := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(cp, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kp, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key, cp, kp
}

// TestTLSClientCertificates: against an etcd that requires client
// certificates, a director with one leads and publishes; one without
// gets nowhere and says so.
func TestTLSClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca, caKey, caFile, _ := writeCert(t, dir, "ca", nil, nil, false)
	_, _, srvCert, srvKey := writeCert(t, dir, "server", ca, caKey, true)
	_, _, cliCert, cliKey := writeCert(t, dir, "client", ca, caKey, false)
	c := etcdtest.StartWith(t, 1, etcdtest.Options{CertFile: srvCert, KeyFile: srvKey, CAFile: caFile})
	a, err := New(Config{ID: "a", Members: testMembers, Endpoints: c.Endpoints(), Prefix: "/t/", LeaseTTL: 2 * time.Second, DialTimeout: 2 * time.Second,
		CAFile: caFile, CertFile: cliCert, KeyFile: cliKey})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	waitFor(t, 60*time.Second, "a leads over TLS", func() bool { return a.Status().Leader })
	if err := a.Publish(context.Background(), Counters{Director: "a"}); err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{ID: "b", Members: testMembers, Endpoints: c.Endpoints(), Prefix: "/t/", LeaseTTL: 2 * time.Second, DialTimeout: 2 * time.Second, CAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.ReadView(context.Background()); err == nil {
		t.Fatal("a director without a client certificate read the document")
	}
	if s := b.Status(); s.Up || s.LeaseOK || s.Errors == 0 {
		t.Fatalf("without a client certificate: status %+v", s)
	}
}

// TestUserPassword: with etcd authentication on, a director with the
// right user and password file leads; a wrong password is refused.
func TestUserPassword(t *testing.T) {
	c := etcdtest.Start(t, 1)
	admin := c.Client(t)
	ctx := context.Background()
	steps := []func() error{
		func() error { _, err := admin.RoleAdd(ctx, "root"); return err },
		func() error { _, err := admin.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.RoleAdd(ctx, "lvs"); return err },
		func() error {
			_, err := admin.RoleGrantPermission(ctx, "lvs", "/t/", clientv3.GetPrefixRangeEnd("/t/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := admin.UserAdd(ctx, "lvs", "s3cret"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "lvs", "lvs"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	}
	for i, s := range steps {
		if err := s(); err != nil {
			t.Fatalf("auth set-up step %d: %v", i, err)
		}
	}
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good"), filepath.Join(dir, "bad")
	if err := os.WriteFile(good, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("guess\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{ID: "a", Members: testMembers, Endpoints: c.Endpoints(), Prefix: "/t/", LeaseTTL: 2 * time.Second, DialTimeout: 2 * time.Second,
		Username: "lvs", PasswordFile: good})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	waitFor(t, 60*time.Second, "a leads with user and password", func() bool { return a.Status().Leader })
	if err := a.Publish(ctx, Counters{Director: "a"}); err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{ID: "b", Members: testMembers, Endpoints: c.Endpoints(), Prefix: "/t/", LeaseTTL: 2 * time.Second, DialTimeout: 2 * time.Second,
		Username: "lvs", PasswordFile: bad})
	if err != nil {
		if !strings.Contains(err.Error(), "authentication failed") {
			t.Fatalf("wrong password: %v, want an authentication error", err)
		}
		return
	}
	defer b.Close()
	if _, err := b.ReadView(ctx); err == nil || !strings.Contains(err.Error(), "authentication failed") {
		t.Fatalf("wrong password: read %v, want an authentication error", err)
	}
}
