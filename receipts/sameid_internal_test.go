package receipts

import "testing"

func TestSameID(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{`1`, `1`, true},
		{`1`, `1.0`, true},
		{`1`, ` 1 `, true},
		{`100`, `1e2`, true},
		{`1`, `2`, false},
		{`"1"`, `1`, false},
		{`"a"`, `"\u0061"`, true},
		{`"a"`, `"b"`, false},
		{`null`, `null`, true},
		{`null`, `0`, false},
		{``, `1`, false},
		{`[1]`, `[1.0]`, false},
		{`1e999`, `1e999`, true}, // the same text
		{`1e999`, `2e999`, false},
	}
	for _, tt := range tests {
		if got := sameID([]byte(tt.a), []byte(tt.b)); got != tt.want {
			t.Errorf("sameID(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestIsResponseTo(t *testing.T) {
	tests := []struct {
		frame, id string
		want      bool
	}{
		{`{"jsonrpc":"2.0","id":7,"result":{}}`, `7`, true},
		{`{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":"x"}}`, `7`, true},
		{`{"jsonrpc":"2.0","id":8,"result":{}}`, `7`, false},
		{`{"jsonrpc":"2.0","id":7,"method":"x"}`, `7`, false},
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`, `7`, false},
		{`[{"jsonrpc":"2.0","id":7,"result":{}}]`, `7`, false},
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}`, `7`, false},
		{`not json`, `7`, false},
	}
	for _, tt := range tests {
		if got := isResponseTo([]byte(tt.frame), tt.id); got != tt.want {
			t.Errorf("isResponseTo(%s, %s) = %v, want %v", tt.frame, tt.id, got, tt.want)
		}
	}
}
