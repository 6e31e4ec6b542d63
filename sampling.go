package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
)

// SamplingContent is the content of a sampling message: one block, or several (2025-11-25 lets a
// message carry tool uses and results together). It marshals a single block as an object.
type SamplingContent []Content

// UnmarshalJSON accepts a content block or an array of them.
func (s *SamplingContent) UnmarshalJSON(b []byte) error {
	var one Content
	if err := json.Unmarshal(b, &one); err == nil {
		*s = SamplingContent{one}
		return nil
	}
	var many []Content
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*s = many
	return nil
}

// MarshalJSON writes one block as an object and several as an array.
func (s SamplingContent) MarshalJSON() ([]byte, error) {
	if len(s) == 1 {
		return json.Marshal(s[0])
	}
	return json.Marshal([]Content(s))
}

// SamplingMessage is one message of a sampling conversation.
type SamplingMessage struct {
	Role    string          `json:"role"`
	Content SamplingContent `json:"content"`
}

// ModelPreferences are the server's hints for choosing a model.
type ModelPreferences struct {
	Hints                []ModelHint `json:"hints,omitempty"`
	CostPriority         *float64    `json:"costPriority,omitempty"`
	SpeedPriority        *float64    `json:"speedPriority,omitempty"`
	IntelligencePriority *float64    `json:"intelligencePriority,omitempty"`
}

// ModelHint names a model, or a family of models, the server would like.
type ModelHint struct {
	Name string `json:"name,omitempty"`
}

// CreateMessageParams are the params of sampling/createMessage.
type CreateMessageParams struct {
	Messages         []SamplingMessage `json:"messages"`
	ModelPreferences *ModelPreferences `json:"modelPreferences,omitempty"`
	SystemPrompt     string            `json:"systemPrompt,omitempty"`
	IncludeContext   string            `json:"includeContext,omitempty"`
	Temperature      *float64          `json:"temperature,omitempty"`
	MaxTokens        int               `json:"maxTokens"`
	StopSequences    []string          `json:"stopSequences,omitempty"`
	Metadata         json.RawMessage   `json:"metadata,omitempty"`
	Tools            json.RawMessage   `json:"tools,omitempty"`
	ToolChoice       json.RawMessage   `json:"toolChoice,omitempty"`
	Meta             json.RawMessage   `json:"_meta,omitempty"`
}

// CreateMessageResult is the client's answer to sampling/createMessage.
type CreateMessageResult struct {
	Role       string          `json:"role"`
	Content    SamplingContent `json:"content"`
	Model      string          `json:"model"`
	StopReason string          `json:"stopReason,omitempty"`
	Meta       json.RawMessage `json:"_meta,omitempty"`
}

// A SamplingHandler answers the server's sampling/createMessage: it asks a model (after
// whatever human review the application requires) and returns its message.
type SamplingHandler func(ctx context.Context, params *CreateMessageParams) (*CreateMessageResult, error)

func (c *Client) sample(ctx context.Context, raw json.RawMessage) (any, error) {
	var p CreateMessageParams
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, &RPCError{Code: RPCInvalidParams, Message: "sampling/createMessage params: " + err.Error()}
	}
	res, err := c.cfg.sampling(ctx, &p)
	if err == nil && res == nil {
		err = errors.New("the sampling handler returned no result")
	}
	return res, err
}
