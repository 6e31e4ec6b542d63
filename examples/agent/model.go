package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/northstar-mcp/mcpclient"
)

// A task is what the agent is asked to do: book a table for party at time, somewhere that
// matches wish.
type task struct {
	Wish  string
	Party int
	Time  string
}

func (t task) String() string {
	return fmt.Sprintf("book a table for %d at %s, somewhere %s", t.Party, t.Time, t.Wish)
}

// A step is the model's next move: a tool call, or the final answer when Tool is "".
type step struct {
	Tool   string
	Args   map[string]any
	Answer string
}

// A turn is one tool call of the conversation and its result.
type turn struct {
	Tool   string
	Args   map[string]any
	Result *mcpclient.CallToolResult
}

// model stands in for the language model, so that the example runs anywhere, offline, the same
// way every time: a script that plans the task's tool calls from the tools offered and the
// results so far, and answers the server's sampling requests. examples/llm puts a real model
// behind the same kind of loop.
type model struct {
	task    task
	out     *printer
	samples atomic.Int64 // sampling requests answered
}

// next returns the model's next step.
func (m *model) next(tools []*mcpclient.Tool, history []turn) step {
	offered := func(name string) bool {
		return slices.ContainsFunc(tools, func(t *mcpclient.Tool) bool { return t.Name == name })
	}
	switch len(history) {
	case 0:
		if !offered("search_restaurants") || !offered("book_table") {
			return step{Answer: "I cannot book tables with the tools this server offers."}
		}
		return step{Tool: "search_restaurants", Args: map[string]any{"wish": m.task.Wish, "party": m.task.Party, "time": m.task.Time}}
	case 1:
		var found struct {
			Pick string `json:"pick"`
		}
		res := history[0].Result
		if res.IsError || json.Unmarshal(res.StructuredContent, &found) != nil || found.Pick == "" {
			return step{Answer: "I found no restaurant: " + res.Text()}
		}
		return step{Tool: "book_table", Args: map[string]any{"restaurant": found.Pick, "party": m.task.Party, "time": m.task.Time}}
	}
	res := history[len(history)-1].Result
	if res.IsError {
		return step{Answer: "I could not book the table: " + res.Text()}
	}
	return step{Answer: "Done: " + res.Text() + "."}
}

// sample answers sampling/createMessage, which the server sends while one of its tools runs to
// borrow the client's model. The scripted model answers a choice among "- name: about" lines
// with the first whose description has the task's wish.
func (m *model) sample(_ context.Context, p *mcpclient.CreateMessageParams) (*mcpclient.CreateMessageResult, error) {
	m.samples.Add(1)
	if len(p.Messages) == 0 || len(p.Messages[len(p.Messages)-1].Content) == 0 {
		return nil, errors.New("nothing to answer")
	}
	prompt := p.Messages[len(p.Messages)-1].Content[0].Text
	pick := ""
	for line := range strings.Lines(prompt) {
		option, ok := strings.CutPrefix(strings.TrimSpace(line), "- ")
		name, about, _ := strings.Cut(option, ": ")
		if ok && strings.Contains(about, m.task.Wish) {
			pick = name
			break
		}
	}
	if pick == "" {
		return nil, fmt.Errorf("no option is %s", m.task.Wish)
	}
	m.out.printf("  the server asks the model: %q -> %s", firstLine(prompt), pick)
	return &mcpclient.CreateMessageResult{Role: "assistant", Model: "scripted", StopReason: "endTurn",
		Content: mcpclient.SamplingContent{mcpclient.TextContent(pick)}}, nil
}

// user stands in for the person the agent works for: it answers the server's questions
// (elicitation/create), here always with the same name.
type user struct {
	name  string
	out   *printer
	asked atomic.Int64 // questions answered
}

func (u *user) answer(_ context.Context, p *mcpclient.ElicitParams) (*mcpclient.ElicitResult, error) {
	u.asked.Add(1)
	u.out.printf("  the server asks the user: %q -> %s", p.Message, u.name)
	return &mcpclient.ElicitResult{Action: mcpclient.ElicitAccept, Content: map[string]any{"name": u.name}}, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
