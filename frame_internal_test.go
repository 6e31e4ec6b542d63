package mcpclient

import (
	"bytes"
	"encoding/json"
	"testing"
)

// A tool call of a stateless revision is framed where its params were encoded, with the shared
// _meta written in front of them: the bytes must be those of composing the params anew, and a
// request that follows from it (a re-issue, the next round) must find its params intact without
// touching the first request's frozen bytes.
func FuzzStatelessToolCallFramedInPlace(f *testing.F) {
	f.Add("echo", `{"text":"hi"}`, "")
	f.Add("echo", `{}`, "a-pinned-id")
	f.Add("t\"<>", `{"a":[1,2,{"b":null}],"_meta":{"x":1}}`, "")
	f.Add("long", `{"a":1}`, "an id far longer than a UUID, so that the frame's start does not fit in the room left for it")
	f.Fuzz(func(t *testing.T, name, args, pinned string) {
		const version = "2026-07-28"
		c := &Client{cfg: newConfig(nil)}
		id := StringID("0b6a5e52-4f9e-4c39-a3c0-6c1a5d0e1f00")
		if pinned != "" {
			id = StringID(pinned)
		}
		build := func(metaRoom int) *Request {
			call, err := encodeToolCall(name, json.RawMessage(args), metaRoom)
			if err != nil {
				return nil
			}
			spec, err := specOf("tools/call", call)
			if err != nil {
				t.Fatal(err)
			}
			spec.version, spec.id = version, id
			req, err := c.build(spec)
			if err != nil {
				return nil
			}
			return req
		}
		inPlace, composed := build(c.metaRoomIn(version)), build(0)
		if inPlace == nil || composed == nil {
			if (inPlace == nil) != (composed == nil) {
				t.Fatalf("one way builds, the other does not: %v, %v", inPlace, composed)
			}
			return
		}
		if !bytes.Equal(inPlace.frame, composed.frame) || !bytes.Equal(inPlace.params, composed.params) || inPlace.fp != composed.fp {
			t.Fatalf("framed in place:\n%s\ncomposed:\n%s", inPlace.frame, composed.frame)
		}
		frozen := bytes.Clone(inPlace.frame)
		follow := func(r *Request) []byte {
			spec := r.requestSpec
			spec.id = StringID("the next one")
			spec.extra = map[string]json.RawMessage{"requestState": json.RawMessage(`"s"`)}
			next, err := c.build(spec)
			if err != nil {
				t.Fatalf("the request following %s: %v", r.frame, err)
			}
			return next.frame
		}
		a, b := follow(inPlace), follow(composed)
		if !bytes.Equal(inPlace.frame, frozen) {
			t.Fatalf("building the next request changed the first one's frame:\n%s\nwas\n%s", inPlace.frame, frozen)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("the request following the one framed in place:\n%s\nthe one following the composed one:\n%s", a, b)
		}
	})
}

// The common stateless tool call takes the in-place path, which the fuzz test above compares.
func TestStatelessToolCallFramedInPlace(t *testing.T) {
	c := &Client{cfg: newConfig(nil)}
	const version = "2026-07-28"
	call, err := encodeToolCall("echo", map[string]string{"text": "hi"}, c.metaRoomIn(version))
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := specOf("tools/call", call)
	spec.version = version
	req, err := c.build(spec)
	if err != nil {
		t.Fatal(err)
	}
	if !req.baseBraceTaken || &req.frame[len(req.frame)-2] != &call.buf[len(call.buf)-1] {
		t.Fatalf("a stateless tool call was framed by copying its params: %s", req.frame)
	}
}
