package transporttest

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
)

// PipeHTTP serves h over in-memory connections and returns a client that reaches it at any
// address. In a synctest bubble, server and client then wait on the bubble's clock, which a
// server on a real socket would stop: a test of delays takes none. The server is closed at the
// end of the test.
func PipeHTTP(tb testing.TB, h http.Handler) *http.Client {
	l := &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
	srv := &http.Server{Handler: h}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(l)
	}()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		client, server := net.Pipe()
		select {
		case l.conns <- server:
			return client, nil
		case <-l.closed:
			return nil, net.ErrClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	tb.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
		<-served
	})
	return &http.Client{Transport: tr}
}

// pipeListener hands the server ends of in-memory connections to an http.Server.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
