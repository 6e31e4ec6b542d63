package transport

import "time"

// SetAfterAnswerTimeout sets how long the connections of t read the rest of a response stream
// after its answer.
func SetAfterAnswerTimeout(t *HTTP, d time.Duration) { t.afterAnswer = d }

// ReadEnded returns a channel closed when the reader goroutine of a Stream or Command
// connection has returned.
func ReadEnded(c Conn) <-chan struct{} {
	switch c := c.(type) {
	case *streamConn:
		return c.readEnd
	case *stdioConn:
		return c.stream.readEnd
	}
	panic("transport: ReadEnded of a connection without a reader")
}
