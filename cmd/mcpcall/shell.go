package main

import (
	"errors"
	"strings"
	"unicode/utf8"
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
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		// The bytes as given, not r: an invalid UTF-8 byte decodes to U+FFFD, and a file name
		// in Latin-1 must reach the server's command line unchanged.
		lit := s[i : i+size]
		i += size
		switch {
		case escaped:
			// A backslash-newline joins lines; inside double quotes a backslash escapes only
			// the characters that are special there and is otherwise kept.
			switch {
			case r == '\n':
			case quote == '"' && !strings.ContainsRune("\"\\$`", r):
				word.WriteByte('\\')
				word.WriteString(lit)
			default:
				word.WriteString(lit)
			}
			escaped, inWord = false, true
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				word.WriteString(lit)
			}
		case r == '\\':
			escaped, inWord = true, true
		case quote == '"':
			if r == '"' {
				quote = 0
			} else {
				word.WriteString(lit)
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
			word.WriteString(lit)
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
