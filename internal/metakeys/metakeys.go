// Package metakeys names the _meta keys the MCP specification defines, for the client and for
// mcptest, which speak them from both ends.
package metakeys

// The per-request _meta keys of the stateless revisions (2026-07-28 and later), and the keys
// that tie a message to a subscription or a task.
const (
	ProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	ClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	ClientInfo         = "io.modelcontextprotocol/clientInfo"
	ServerInfo         = "io.modelcontextprotocol/serverInfo"
	LogLevel           = "io.modelcontextprotocol/logLevel"
	SubscriptionID     = "io.modelcontextprotocol/subscriptionId"
	RelatedTask        = "io.modelcontextprotocol/related-task"
)
