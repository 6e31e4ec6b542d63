package mcpclient

import (
	"context"
	"encoding/json"
)

// LoggingLevel is a syslog severity, as MCP names them.
type LoggingLevel string

// The logging levels, least severe first.
const (
	LevelDebug     LoggingLevel = "debug"
	LevelInfo      LoggingLevel = "info"
	LevelNotice    LoggingLevel = "notice"
	LevelWarning   LoggingLevel = "warning"
	LevelError     LoggingLevel = "error"
	LevelCritical  LoggingLevel = "critical"
	LevelAlert     LoggingLevel = "alert"
	LevelEmergency LoggingLevel = "emergency"
)

// LogMessage is a log record the server sent (notifications/message).
type LogMessage struct {
	Level  LoggingLevel    `json:"level"`
	Logger string          `json:"logger,omitempty"`
	Data   json.RawMessage `json:"data"`
}

// A LogHandler receives the server's log records. It runs on the client's notification
// goroutine: it must not block.
type LogHandler func(ctx context.Context, msg *LogMessage)

// SetLoggingLevel asks the server to send log records of level and above. In the older
// revisions it sends logging/setLevel; in the stateless ones, which ask per request, every
// request made from now on carries the level in _meta (io.modelcontextprotocol/logLevel).
func (c *Client) SetLoggingLevel(ctx context.Context, level LoggingLevel, opts ...CallOption) error {
	if c.stateless() {
		l := string(level)
		c.logLevel.Store(&l)
		return nil
	}
	return c.call(ctx, "logging/setLevel", struct {
		Level LoggingLevel `json:"level"`
	}{level}, nil, opts...)
}
