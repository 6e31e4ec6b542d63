package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// A fakeModel speaks enough of the Messages API (POST /v1/messages, without streaming) for this
// example to run without a network: to a question it has a plan for, it answers with that tool
// call; once the conversation ends in tool results, it answers in text that repeats them. It
// keeps every request body it receives.
type fakeModel struct {
	plans map[string]plannedCall // by the text of the conversation's first message

	mu       sync.Mutex
	requests [][]byte
}

// A plannedCall is the tool call a fakeModel answers a question with.
type plannedCall struct {
	Tool  string
	Input json.RawMessage
}

// The parts of a Messages API request the fake reads.
type wireRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string      `json:"role"`
		Content []wireBlock `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
}

// A wireBlock is a content block of a message: text, tool_use or tool_result.
type wireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   []wireBlock     `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// Requests returns the bodies of the requests received so far, in order.
func (m *fakeModel) Requests() [][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([][]byte(nil), m.requests...)
}

func (m *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		writeAPIError(w, http.StatusNotFound, "not_found_error", "only POST /v1/messages is served")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	m.mu.Lock()
	m.requests = append(m.requests, body)
	n := len(m.requests)
	m.mu.Unlock()

	var req wireRequest
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
		writeAPIError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("unreadable request: %v", err))
		return
	}
	writeMessage(w, req.Model, n, m.answer(req, n))
}

// answer is the fake's reply to a conversation: text about the tool results that end it, or
// the planned tool call for its question.
func (m *fakeModel) answer(req wireRequest, n int) []wireBlock {
	last := req.Messages[len(req.Messages)-1]
	var report []string
	for _, b := range last.Content {
		if b.Type != "tool_result" {
			continue
		}
		text := blockText(b.Content)
		if b.IsError {
			report = append(report, "The tool call did not go through as asked: "+text)
		} else {
			report = append(report, "Done: "+text)
		}
	}
	if len(report) > 0 {
		return []wireBlock{{Type: "text", Text: strings.Join(report, "\n")}}
	}

	question := blockText(req.Messages[0].Content)
	plan, ok := m.plans[question]
	if !ok {
		return []wireBlock{{Type: "text", Text: "I have no tool call planned for that."}}
	}
	input := plan.Input
	if input == nil {
		input = json.RawMessage(`{}`)
	}
	for _, t := range req.Tools {
		if t.Name == plan.Tool {
			return []wireBlock{
				{Type: "text", Text: "I will use " + plan.Tool + "."},
				{Type: "tool_use", ID: fmt.Sprintf("toolu_%02d", n), Name: plan.Tool, Input: input},
			}
		}
	}
	return []wireBlock{{Type: "text", Text: "The tool " + plan.Tool + " is not offered to me."}}
}

func blockText(blocks []wireBlock) string {
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// writeMessage answers with a Message holding content, stopping for tool use when the content
// asks for a tool.
func writeMessage(w http.ResponseWriter, model string, n int, content []wireBlock) {
	stop := "end_turn"
	for _, b := range content {
		if b.Type == "tool_use" {
			stop = "tool_use"
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id":            fmt.Sprintf("msg_%02d", n),
		"type":          "message",
		"role":          "assistant",
		"model":         model,
		"content":       content,
		"stop_reason":   stop,
		"stop_sequence": nil,
		"usage":         map[string]int{"input_tokens": 0, "output_tokens": 0},
	})
}

func writeAPIError(w http.ResponseWriter, status int, kind, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{
		"type":  "error",
		"error": map[string]string{"type": kind, "message": message},
	})
}
