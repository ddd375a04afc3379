package padlocktest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
)

// zkTLSCipherSuites are the suites a TLS ZooKeeper offers. ZooKeeper 3.8's
// defaults are TLS 1.2's only, so that it never speaks TLS 1.3 even when
// told to (seen with Debian's 3.8.0); TLS 1.3 is what the other servers
// speak to padlock, and the case where a refused client certificate is
// reported after the client's side of the handshake.
const zkTLSCipherSuites = "TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384," +
	"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"

// zkTLS returns the zoo.cfg lines of a server that takes clients on
// host:port over TLS only (Netty's connection factory, ZooKeeper's
// secureClientPort), with certs' server certificate, and requires a client
// certificate signed by certs' CA; and the client side, for the readiness
// probe. ZooKeeper reads PEM itself, but only a PKCS #8 key, followed by
// the certificate in one file: it is written into dir.
func zkTLS(certs *Certs, dir string, port int, host string) (lines []string, client *tls.Config, err error) {
	keyPEM, err := os.ReadFile(certs.ServerKey)
	if err != nil {
		return nil, nil, err
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, nil, fmt.Errorf("%s: no PEM key", certs.ServerKey)
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", certs.ServerKey, err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	certPEM, err := os.ReadFile(certs.ServerCert)
	if err != nil {
		return nil, nil, err
	}
	keyStore := filepath.Join(dir, "server-keystore.pem")
	store := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), certPEM...)
	if err := os.WriteFile(keyStore, store, 0o600); err != nil {
		return nil, nil, err
	}
	if client, err = certs.ClientTLS(); err != nil {
		return nil, nil, err
	}
	return []string{
		fmt.Sprintf("secureClientPort=%d", port),
		"secureClientPortAddress=" + host,
		"serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
		"ssl.keyStore.location=" + keyStore,
		"ssl.keyStore.type=PEM",
		"ssl.trustStore.location=" + certs.CA,
		"ssl.trustStore.type=PEM",
		"ssl.clientAuth=need",
		"ssl.protocol=TLSv1.3",
		"ssl.enabledProtocols=TLSv1.3,TLSv1.2",
		"ssl.ciphersuites=" + zkTLSCipherSuites,
	}, client, nil
}
