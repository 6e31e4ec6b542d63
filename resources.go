package mcpclient

import (
	"context"
	"encoding/json"
	"iter"
)

// Resource is one resource a server lists.
type Resource struct {
	URI         string          `json:"uri"`
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	MIMEType    string          `json:"mimeType,omitempty"`
	Size        *int64          `json:"size,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
	Meta        json.RawMessage `json:"_meta,omitempty"`
}

// ResourceTemplate describes a family of resources by an RFC 6570 URI template.
type ResourceTemplate struct {
	URITemplate string          `json:"uriTemplate"`
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	MIMEType    string          `json:"mimeType,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
	Meta        json.RawMessage `json:"_meta,omitempty"`
}

// ResourceContents is the content of a resource: Text, or Blob (base64).
type ResourceContents struct {
	URI      string          `json:"uri"`
	MIMEType string          `json:"mimeType,omitempty"`
	Text     string          `json:"text,omitempty"`
	Blob     string          `json:"blob,omitempty"`
	Meta     json.RawMessage `json:"_meta,omitempty"`
}

// ListResourcesResult is one page of resources/list.
type ListResourcesResult struct {
	Resources  []*Resource `json:"resources"`
	NextCursor string      `json:"nextCursor,omitempty"`
	// TTLMs is how long the server says the result stays fresh, in milliseconds from its
	// arrival (2026-07-28 and later): nil when it does not say, 0 when stale at once.
	TTLMs *int64 `json:"ttlMs,omitempty"`
	// CacheScope says who may reuse the result: "private" (only under the same authorization)
	// or "public".
	CacheScope string `json:"cacheScope,omitempty"`
}

// ListResourceTemplatesResult is one page of resources/templates/list.
type ListResourceTemplatesResult struct {
	ResourceTemplates []*ResourceTemplate `json:"resourceTemplates"`
	NextCursor        string              `json:"nextCursor,omitempty"`
	// TTLMs is how long the server says the result stays fresh, in milliseconds from its
	// arrival (2026-07-28 and later): nil when it does not say, 0 when stale at once.
	TTLMs *int64 `json:"ttlMs,omitempty"`
	// CacheScope says who may reuse the result: "private" (only under the same authorization)
	// or "public".
	CacheScope string `json:"cacheScope,omitempty"`
}

// ReadResourceResult is the answer to resources/read.
type ReadResourceResult struct {
	Contents []ResourceContents `json:"contents"`
	// TTLMs is how long the server says the result stays fresh, in milliseconds from its
	// arrival (2026-07-28 and later): nil when it does not say, 0 when stale at once.
	TTLMs *int64 `json:"ttlMs,omitempty"`
	// CacheScope says who may reuse the result: "private" (only under the same authorization)
	// or "public".
	CacheScope string `json:"cacheScope,omitempty"`
	// Meta is the result's own _meta, beside that of each of its Contents: extensions put
	// what concerns the read as a whole there.
	Meta json.RawMessage `json:"_meta,omitempty"`
}

type cursorParams struct {
	Cursor string `json:"cursor,omitempty"`
}

type uriParams struct {
	URI string `json:"uri"`
}

// ListResourcesPage returns one page of resources/list.
func (c *Client) ListResourcesPage(ctx context.Context, cursor string, opts ...CallOption) (*ListResourcesResult, error) {
	var res ListResourcesResult
	if err := c.call(ctx, "resources/list", cursorParams{cursor}, &res, opts...); err != nil {
		return nil, err
	}
	return &res, nil
}

// Resources iterates over every resource the server lists, fetching pages as needed; it yields
// the first error and stops.
func (c *Client) Resources(ctx context.Context) iter.Seq2[*Resource, error] {
	return paginate(ctx, func(ctx context.Context, cursor string) ([]*Resource, string, error) {
		page, err := c.ListResourcesPage(ctx, cursor)
		if err != nil {
			return nil, "", err
		}
		return page.Resources, page.NextCursor, nil
	}, nil)
}

// ListResourceTemplatesPage returns one page of resources/templates/list.
func (c *Client) ListResourceTemplatesPage(ctx context.Context, cursor string, opts ...CallOption) (*ListResourceTemplatesResult, error) {
	var res ListResourceTemplatesResult
	if err := c.call(ctx, "resources/templates/list", cursorParams{cursor}, &res, opts...); err != nil {
		return nil, err
	}
	return &res, nil
}

// ResourceTemplates iterates over every resource template, fetching pages as needed.
func (c *Client) ResourceTemplates(ctx context.Context) iter.Seq2[*ResourceTemplate, error] {
	return paginate(ctx, func(ctx context.Context, cursor string) ([]*ResourceTemplate, string, error) {
		page, err := c.ListResourceTemplatesPage(ctx, cursor)
		if err != nil {
			return nil, "", err
		}
		return page.ResourceTemplates, page.NextCursor, nil
	}, nil)
}

// ReadResource reads the resource at uri.
func (c *Client) ReadResource(ctx context.Context, uri string, opts ...CallOption) (*ReadResourceResult, error) {
	var res ReadResourceResult
	if err := c.call(ctx, "resources/read", uriParams{uri}, &res, opts...); err != nil {
		return nil, err
	}
	return &res, nil
}

// Subscribe asks the server for notifications/resources/updated when uri changes; see
// WithResourceUpdatedHandler.
func (c *Client) Subscribe(ctx context.Context, uri string, opts ...CallOption) error {
	return c.call(ctx, "resources/subscribe", uriParams{uri}, nil, opts...)
}

// Unsubscribe ends a Subscribe.
func (c *Client) Unsubscribe(ctx context.Context, uri string, opts ...CallOption) error {
	return c.call(ctx, "resources/unsubscribe", uriParams{uri}, nil, opts...)
}

// A ResourceUpdatedHandler learns that a subscribed resource changed; read it again to see how.
// It runs on the client's notification goroutine: it must not block, but it may call the client.
type ResourceUpdatedHandler func(ctx context.Context, uri string)
