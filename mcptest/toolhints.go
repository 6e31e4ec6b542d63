package mcptest

import "github.com/northstar-mcp/mcpclient"

// A ToolOption adds to the description of a tool that WithTool or Server.AddTool registers.
//
// The hint options (ReadOnlyHint, DestructiveHint, IdempotentHint, OpenWorldHint) set the
// tool's annotations, whose hints the MCP schema makes optional booleans (*bool in
// mcpclient.ToolAnnotations): a hint no option sets keeps the value the tool's own
// Annotations give it, or stays absent from tools/list, where it means the schema's default
// (readOnlyHint false, destructiveHint true, idempotentHint false, openWorldHint true).
type ToolOption interface{ applyTool(*mcpclient.Tool) }

type toolOptionFunc func(*mcpclient.Tool)

func (f toolOptionFunc) applyTool(t *mcpclient.Tool) { f(t) }

// ReadOnlyHint sets readOnlyHint: whether the tool leaves its environment unchanged. A client
// of this module that listed the tool read-only takes it as safe to run twice: when a call's
// delivery may have been lost and the server keeps no receipts, it re-issues the call under a
// new id, where it would otherwise end it with mcpclient.ErrOutcomeUnknown.
func ReadOnlyHint(readOnly bool) ToolOption { return hint(readOnly, readOnlyHint) }

// DestructiveHint sets destructiveHint: whether an update by the tool may destroy what was
// there. It means something only when readOnlyHint is false.
func DestructiveHint(destructive bool) ToolOption { return hint(destructive, destructiveHint) }

// IdempotentHint sets idempotentHint: whether calling the tool again with the same arguments
// has no further effect. A client of this module takes an idempotent tool as safe to run
// twice, as a read-only one. It means something only when readOnlyHint is false.
func IdempotentHint(idempotent bool) ToolOption { return hint(idempotent, idempotentHint) }

// OpenWorldHint sets openWorldHint: whether the tool reaches beyond a closed domain (the web,
// say, where a memory store is closed).
func OpenWorldHint(openWorld bool) ToolOption { return hint(openWorld, openWorldHint) }

func readOnlyHint(a *mcpclient.ToolAnnotations) **bool    { return &a.ReadOnlyHint }
func destructiveHint(a *mcpclient.ToolAnnotations) **bool { return &a.DestructiveHint }
func idempotentHint(a *mcpclient.ToolAnnotations) **bool  { return &a.IdempotentHint }
func openWorldHint(a *mcpclient.ToolAnnotations) **bool   { return &a.OpenWorldHint }

// hint is the option that sets the hint field picks out to v.
func hint(v bool, field func(*mcpclient.ToolAnnotations) **bool) ToolOption {
	return toolOptionFunc(func(t *mcpclient.Tool) {
		if t.Annotations == nil {
			t.Annotations = new(mcpclient.ToolAnnotations)
		}
		set := v // each tool its own, so that no two descriptions share a hint
		*field(t.Annotations) = &set
	})
}

// describeTool returns tool with opts applied. The annotations the options change are a copy:
// the caller's, which tool points to, stay as they were.
func describeTool(tool mcpclient.Tool, opts []ToolOption) mcpclient.Tool {
	if len(opts) == 0 {
		return tool
	}
	if tool.Annotations != nil {
		a := *tool.Annotations
		tool.Annotations = &a
	}
	for _, o := range opts {
		if o != nil {
			o.applyTool(&tool)
		}
	}
	return tool
}
