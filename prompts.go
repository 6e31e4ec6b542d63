package mcpclient

import (
	"context"
	"encoding/json"
	"iter"
)

// Prompt is one prompt template a server lists.
type Prompt struct {
	Name        string           `json:"name"`
	Title       string           `json:"title,omitempty"`
	Description string           `json:"description,omitempty"`
	Arguments   []PromptArgument `json:"arguments,omitempty"`
	Meta        json.RawMessage  `json:"_meta,omitempty"`
}

// PromptArgument is one argument a prompt takes.
type PromptArgument struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// PromptMessage is one message of a rendered prompt.
type PromptMessage struct {
	Role    string  `json:"role"`
	Content Content `json:"content"`
}

// ListPromptsResult is one page of prompts/list.
type ListPromptsResult struct {
	Prompts    []*Prompt `json:"prompts"`
	NextCursor string    `json:"nextCursor,omitempty"`
	// TTLMs is how long the server says the result stays fresh, in milliseconds from its
	// arrival (2026-07-28 and later): nil when it does not say, 0 when stale at once.
	TTLMs *int64 `json:"ttlMs,omitempty"`
	// CacheScope says who may reuse the result: "private" (only under the same authorization)
	// or "public".
	CacheScope string `json:"cacheScope,omitempty"`
}

// GetPromptResult is a rendered prompt.
type GetPromptResult struct {
	Description string          `json:"description,omitempty"`
	Messages    []PromptMessage `json:"messages"`
}

// ListPromptsPage returns one page of prompts/list.
func (c *Client) ListPromptsPage(ctx context.Context, cursor string, opts ...CallOption) (*ListPromptsResult, error) {
	var res ListPromptsResult
	if err := c.call(ctx, "prompts/list", cursorParams{cursor}, &res, opts...); err != nil {
		return nil, err
	}
	return &res, nil
}

// Prompts iterates over every prompt the server lists, fetching pages as needed.
func (c *Client) Prompts(ctx context.Context) iter.Seq2[*Prompt, error] {
	return paginate(ctx, func(ctx context.Context, cursor string) ([]*Prompt, string, error) {
		page, err := c.ListPromptsPage(ctx, cursor)
		if err != nil {
			return nil, "", err
		}
		return page.Prompts, page.NextCursor, nil
	}, nil)
}

// GetPrompt renders the prompt name with args.
func (c *Client) GetPrompt(ctx context.Context, name string, args map[string]string, opts ...CallOption) (*GetPromptResult, error) {
	var res GetPromptResult
	params := struct {
		Name      string            `json:"name"`
		Arguments map[string]string `json:"arguments,omitempty"`
	}{name, args}
	if err := c.call(ctx, "prompts/get", params, &res, opts...); err != nil {
		return nil, err
	}
	return &res, nil
}
