//go:build go1.27

package mcpclient

import (
	"bytes"
	"encoding/json/jsontext"
	jsonv2 "encoding/json/v2"
	"errors"
	"fmt"
	"io"
)

func init() {
	answerDecoders = append(answerDecoders,
		answerDecoder{"jsonv2", func(frame []byte) (int, error) {
			var answer textAnswer
			if err := jsonv2.Unmarshal(frame, &answer); err != nil || len(answer.Result.Content) != 1 {
				return 0, fmt.Errorf("%v, %d blocks", err, len(answer.Result.Content))
			}
			return len(answer.Result.Content[0].Text), nil
		}},
		answerDecoder{"jsontext", decodeAnswerTokens},
	)
}

// decodeAnswerTokens reads a tools/call answer with jsontext's token reader, as a scanner built
// on it would: the members it needs read, the others skipped, every byte validated.
func decodeAnswerTokens(frame []byte) (int, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(frame))
	var n int
	blocks := 0
	err := members(dec, func(name string) error {
		if name != "result" {
			return dec.SkipValue()
		}
		return members(dec, func(name string) error {
			if name != "content" {
				return dec.SkipValue()
			}
			if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '[' {
				return fmt.Errorf("content: %v", err)
			}
			for dec.PeekKind() != ']' {
				blocks++
				if err := members(dec, func(name string) error {
					if name != "text" {
						return dec.SkipValue()
					}
					tok, err := dec.ReadToken()
					if err != nil || tok.Kind() != '"' {
						return fmt.Errorf("text: %v", err)
					}
					n = len(tok.String())
					return nil
				}); err != nil {
					return err
				}
			}
			_, err := dec.ReadToken()
			return err
		})
	})
	if err != nil {
		return 0, err
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("after the answer: %v", err)
	}
	if blocks != 1 {
		return 0, fmt.Errorf("%d blocks", blocks)
	}
	return n, nil
}

// members reads an object, handing each member's name to read, which reads its value.
func members(dec *jsontext.Decoder, read func(name string) error) error {
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return fmt.Errorf("want an object: %v", err)
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		if err := read(tok.String()); err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}
