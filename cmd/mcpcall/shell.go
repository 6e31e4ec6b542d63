package main

import (
	"errors"
	"strings"
)

// splitCommand splits a command line into words as a POSIX shell would, without expansions:
// whitespace separates words; single quotes keep everything literally; double quotes keep
// everything but \" \\ \$ \` and \newline; a backslash outside quotes escapes the next character.
func splitCommand(s string) ([]string, error) {
	var (
		words   []string
		word    strings.Builder
		inWord  bool
		escaped bool
		quote   rune // 0, '\'' or '"'
	)
	for _, r := range s {
		switch {
		case escaped:
			// A backslash-newline joins lines; inside double quotes a backslash escapes only
			// the characters that are special there and is otherwise kept.
			switch {
			case r == '\n':
			case quote == '"' && !strings.ContainsRune("\"\\$`", r):
				word.WriteRune('\\')
				word.WriteRune(r)
			default:
				word.WriteRune(r)
			}
			escaped, inWord = false, true
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				word.WriteRune(r)
			}
		case r == '\\':
			escaped, inWord = true, true
		case quote == '"':
			if r == '"' {
				quote = 0
			} else {
				word.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	switch {
	case escaped:
		return nil, errors.New("command ends with a backslash")
	case quote != 0:
		return nil, errors.New("unterminated quote in command")
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, nil
}
