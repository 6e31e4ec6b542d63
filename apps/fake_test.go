package apps_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/apps"
)

// reader is a Caller that answers resources/read with res and nothing else.
type reader struct {
	mcpclient.Caller
	res *mcpclient.ReadResourceResult
}

func (r reader) ReadResource(context.Context, string, ...mcpclient.CallOption) (*mcpclient.ReadResourceResult, error) {
	return r.res, nil
}

func TestReadUIKeepsTheResultMeta(t *testing.T) {
	c := reader{res: &mcpclient.ReadResourceResult{
		Contents: []mcpclient.ResourceContents{
			{URI: "ui://s/other", MIMEType: apps.MIMEType, Text: "<html>other</html>"},
			{URI: "ui://s/v", MIMEType: "text/plain", Text: "not it"},
			{URI: "ui://s/v", MIMEType: apps.MIMEType, Text: "<html>it</html>"},
		},
		Meta: json.RawMessage(`{"trace":"t1"}`),
	}}
	v, err := apps.ReadUI(testCtx(t), c, "ui://s/v")
	if err != nil {
		t.Fatal(err)
	}
	if v.HTML != "<html>it</html>" || string(v.ResultMeta) != `{"trace":"t1"}` {
		t.Errorf("view %q, result _meta %s", v.HTML, v.ResultMeta)
	}
}

func TestReadUIRefusesContentWithoutOneHTML(t *testing.T) {
	for name, rc := range map[string]mcpclient.ResourceContents{
		"text and blob": {URI: "ui://s/v", MIMEType: apps.MIMEType, Text: "<html></html>", Blob: "PGh0bWw+PC9odG1sPg=="},
		"neither":       {URI: "ui://s/v", MIMEType: apps.MIMEType},
		"bad base64":    {URI: "ui://s/v", MIMEType: apps.MIMEType, Blob: "<html>"},
	} {
		c := reader{res: &mcpclient.ReadResourceResult{Contents: []mcpclient.ResourceContents{rc}}}
		if v, err := apps.ReadUI(testCtx(t), c, "ui://s/v"); !errors.Is(err, apps.ErrNotAppHTML) || v != nil {
			t.Errorf("%s: view %v, err %v, want ErrNotAppHTML", name, v, err)
		}
	}
}
