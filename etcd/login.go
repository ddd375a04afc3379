package etcd

import (
	"context"
	"crypto/tls"
	"net"
	"sync"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/padlock-go/padlock/backends"
)

const authenticateMethod = "/etcdserverpb.Auth/Authenticate"

// login lets the client renew an expired auth token on etcd servers before
// 3.5 (Debian's 3.4, for one). The client sends every request, the login
// included, with its current token; when a request fails with "invalid
// auth token" it logs in again. A server before 3.5 checks the token of a
// login too, so the renewal fails on the very token it is meant to
// replace, and the client retries it, each time making the server check
// the password (etcd-io/etcd#12385; the client's workaround, which
// cleared the token first, is gone from clientv3 3.6). login sits inside
// the client's retry interceptor: a login refused for its token is sent
// again, once, over a connection of its own that carries no token.
type login struct {
	endpoints []string
	tls       *tls.Config       // nil for plain text
	dial      backends.DialFunc // nil: a net.Dialer

	mu sync.Mutex
	cc *grpc.ClientConn // made on first use
}

func (l *login) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if method != authenticateMethod || rpctypes.Error(err) != rpctypes.ErrInvalidAuthToken {
		return err
	}
	bare, cerr := l.conn()
	if cerr != nil {
		return err
	}
	return bare.Invoke(ctx, method, req, reply, opts...)
}

// conn returns the token-free connection, making it the first time.
func (l *login) conn() (*grpc.ClientConn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cc != nil {
		return l.cc, nil
	}
	r := manual.NewBuilderWithScheme("padlock-etcd-login")
	var addrs []resolver.Address
	for _, ep := range l.endpoints {
		a := hostPort(ep)
		host, _, _ := net.SplitHostPort(a)
		addrs = append(addrs, resolver.Address{Addr: a, ServerName: host})
	}
	r.InitialState(resolver.State{Addresses: addrs})
	creds := insecure.NewCredentials()
	if l.tls != nil {
		creds = credentials.NewTLS(l.tls)
	}
	opts := []grpc.DialOption{grpc.WithResolvers(r), grpc.WithTransportCredentials(creds)}
	if l.dial != nil {
		opts = append(opts, grpc.WithContextDialer(contextDialer(l.dial)))
	}
	cc, err := grpc.NewClient(r.Scheme()+":///login", opts...)
	if err != nil {
		return nil, err
	}
	l.cc = cc
	return cc, nil
}

// Close closes the connection, if one was made.
func (l *login) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cc != nil {
		l.cc.Close()
		l.cc = nil
	}
}
