// kubelet-standin: the one kubelet endpoint the tests need, port-forward, served by the kubelet's
// own port-forward server (k8s.io/cri-streaming/pkg/streaming/portforward, what the kubelet's
// streaming server runs), so that a real kube-apiserver can proxy `pods/portforward` to "pods"
// that are loopback processes. There is no container runtime here: the stand-in forwards a pod's
// port to a loopback address given on the command line instead of into a network namespace.
//
// Usage:
//
//	kubelet-standin -forward NAMESPACE/POD:PORT=127.0.0.1:TARGET ...
//
// It listens with TLS (a throwaway self-signed certificate: the kube-apiserver checks a kubelet's
// certificate only with --kubelet-certificate-authority) on 127.0.0.1 at a port the kernel picks,
// prints {"port":N} as its first line, and exits when stdin closes. Register it as a Node whose
// InternalIP is 127.0.0.1 and whose status.daemonEndpoints.kubeletEndpoint.Port is N.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/cri-streaming/pkg/streaming/portforward"
)

type forwards map[string]string

func (f forwards) String() string { return fmt.Sprint(map[string]string(f)) }

func (f forwards) Set(value string) error {
	key, target, ok := strings.Cut(value, "=")
	if !ok || !strings.Contains(key, "/") || !strings.Contains(key, ":") || !strings.HasPrefix(target, "127.") {
		return fmt.Errorf("want NAMESPACE/POD:PORT=127.x.y.z:TARGET, got %q", value)
	}
	f[key] = target
	return nil
}

// forwarder dials the loopback target of a pod's port.
type forwarder struct {
	namespace string
	targets   forwards
}

func (f forwarder) PortForward(ctx context.Context, pod string, _ string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	target, ok := f.targets[fmt.Sprintf("%s/%s:%d", f.namespace, pod, port)]
	if !ok {
		return fmt.Errorf("pod %s/%s has no port %d here", f.namespace, pod, port)
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", target)
	if err != nil {
		return err
	}
	defer conn.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(conn, stream); done <- struct{}{} }()
	go func() { _, _ = io.Copy(stream, conn); done <- struct{}{} }()
	<-done
	return nil
}

func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	template := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "kubelet-standin"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

func main() {
	targets := forwards{}
	flag.Var(targets, "forward", "NAMESPACE/POD:PORT=127.x.y.z:TARGET (repeatable)")
	flag.Parse()
	cert, err := selfSigned()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	// The kube-apiserver's pod port-forward location: /portForward/{namespace}/{pod}[/{uid}].
	handler := func(w http.ResponseWriter, r *http.Request) {
		f := forwarder{namespace: r.PathValue("namespace"), targets: targets}
		// The ports of a websocket request are in its query (?ports=), as the kubelet reads them.
		options, err := portforward.NewV4Options(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		portforward.ServePortForward(w, r, f, r.PathValue("pod"), r.PathValue("uid"), options, 5*time.Minute, 30*time.Second, portforward.SupportedProtocols)
	}
	mux.HandleFunc("/portForward/{namespace}/{pod}", handler)
	mux.HandleFunc("/portForward/{namespace}/{pod}/{uid}", handler)
	server := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = server.ServeTLS(listener, "", "") }()
	line, _ := json.Marshal(map[string]int{"port": listener.Addr().(*net.TCPAddr).Port})
	fmt.Println(string(line))
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = server.Close()
}
