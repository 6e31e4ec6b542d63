// Package skills is the client side of the Skills extension (SEP-2640,
// https://modelcontextprotocol.io/seps/2640-skills-extension), with which a server offers skills:
// a SKILL.md whose YAML frontmatter names and describes the skill, and the files beside it.
// skills/list and skills/get describe each skill by an entry: the URI of its SKILL.md, its
// frontmatter, and a manifest of its files with the SHA-256 digest and size of each. The files
// themselves are resources, read with resources/read.
//
// Entries are listed and got ([List], [ListPage], [Get]) without reading any file: files are
// read only when the caller asks ([Load], [ReadFile], [Files]), and each is checked against the
// manifest before the caller sees it; see [ReadFile]. A host that uses skills declares the
// extension: mcpclient.WithExtension(skills.Extension, nil).
//
// The package is built on the client's public API alone (NewRequest, Do, Session, Paginate): an
// extension of the protocol can be written the same way outside this module. Its calls take a
// mcpclient.Caller: a *mcpclient.Client, or a plugin that decorates one.
package skills

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/extcall"
)

// Extension is the identifier of the Skills extension, under capabilities.extensions.
// A server declares it to serve skills; a host declares it with mcpclient.WithExtension to say
// that it uses them.
const Extension = "io.modelcontextprotocol/skills"

// MIMETypeDirectory is the mimeType of a directory among the children resources/directory/read
// lists: one to descend into rather than read.
const MIMETypeDirectory = "inode/directory"

// Capabilities is a server's declaration of the Skills extension.
type Capabilities struct {
	// DirectoryRead: the server answers resources/directory/read for the directories of its
	// skills (ReadDirectory).
	DirectoryRead bool `json:"directoryRead,omitempty"`
}

// CapabilitiesOf returns the server's declaration of the Skills extension, read from caps (as
// Client.ServerCapabilities or Session returns them); ok is false when it declares none. A
// declaration whose settings do not read as Capabilities declares the extension with no
// optional feature.
func CapabilitiesOf(caps mcpclient.ServerCapabilities) (s Capabilities, ok bool) {
	raw, found := caps.Extensions[Extension]
	if !found {
		return Capabilities{}, false
	}
	if json.Unmarshal(raw, &s) != nil {
		return Capabilities{}, true
	}
	return s, true
}

// Skill is the entry of one skill, as skills/list and skills/get describe it.
//
// Its manifest is Files, or, when the server publishes none, Dynamic. An entry whose resources
// are neither a list of files nor "dynamic" has no manifest at all, and the client refuses to
// read its files (see ReadFile).
type Skill struct {
	// URI is the URI of the skill's SKILL.md, such as skill://pdf-processing/SKILL.md; the
	// skill's files are in the directory it names.
	URI string
	// Frontmatter is the YAML frontmatter of the skill's SKILL.md rendered as a JSON object, as
	// the server sent it. Name and Description read its two required fields.
	Frontmatter json.RawMessage
	// Files is the manifest: every file of the skill, SKILL.md included, with its digest and
	// size. Nil when the skill is Dynamic or has no manifest.
	Files []File
	// Dynamic: the server publishes no manifest ("resources": "dynamic"), so the skill's files
	// cannot be verified; see WithUnverifiableFiles.
	Dynamic bool
	// Meta is the entry's _meta.
	Meta json.RawMessage

	// manifestErr says why the entry's resources are no manifest; nil when they are one.
	manifestErr error
}

// File is one file of a skill's manifest.
type File struct {
	// URI is the file's resource URI: the skill's SKILL.md, or a file in its directory.
	URI string `json:"uri"`
	// Digest is the SHA-256 digest of the file's bytes, as "sha256:" and 64 lowercase hex
	// digits.
	Digest string `json:"digest"`
	// Size is the length of the file's bytes.
	Size int64 `json:"size"`
}

// skillDynamic is the value of resources in the entry of a skill without a manifest.
const skillDynamic = "dynamic"

type skillJSON struct {
	URI         string          `json:"uri"`
	Frontmatter json.RawMessage `json:"frontmatter,omitempty"`
	Resources   json.RawMessage `json:"resources,omitempty"`
	Meta        json.RawMessage `json:"_meta,omitempty"`
}

// UnmarshalJSON reads a skill entry. Resources that are no manifest do not fail the decoding,
// which would lose every other skill of a listing for one bad entry: the entry is kept without
// a manifest, and reading its files is refused, saying why.
func (s *Skill) UnmarshalJSON(b []byte) error {
	var w skillJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = Skill{URI: w.URI, Frontmatter: w.Frontmatter, Meta: w.Meta}
	r := bytes.TrimSpace(w.Resources)
	switch {
	case len(r) == 0 || string(r) == "null":
		s.manifestErr = errors.New("the entry has no resources")
	case r[0] == '"':
		var form string
		if json.Unmarshal(r, &form) == nil && form == skillDynamic {
			s.Dynamic = true
		} else {
			s.manifestErr = fmt.Errorf("resources is %s, neither a list of files nor %q", truncate(r, 40), skillDynamic)
		}
	default:
		if err := json.Unmarshal(r, &s.Files); err != nil || s.Files == nil {
			s.Files = nil
			s.manifestErr = fmt.Errorf("resources is no list of {uri, digest, size}: %s", truncate(r, 60))
		}
	}
	return nil
}

// MarshalJSON writes the entry as the server sent it: resources is "dynamic" or the files, and
// is left out of an entry that had no manifest.
func (s Skill) MarshalJSON() ([]byte, error) {
	w := skillJSON{URI: s.URI, Frontmatter: s.Frontmatter, Meta: s.Meta}
	switch {
	case s.Dynamic:
		w.Resources = json.RawMessage(`"` + skillDynamic + `"`)
	case s.Files != nil:
		b, err := json.Marshal(s.Files)
		if err != nil {
			return nil, err
		}
		w.Resources = b
	}
	return json.Marshal(w)
}

// Name returns the skill's name, frontmatter.name; "" when there is none.
func (s *Skill) Name() string { return s.frontmatterString("name") }

// Description returns the skill's description, frontmatter.description; "" when there is none.
func (s *Skill) Description() string { return s.frontmatterString("description") }

func (s *Skill) frontmatterString(field string) string {
	var fm map[string]json.RawMessage
	if json.Unmarshal(s.Frontmatter, &fm) != nil {
		return ""
	}
	var v string
	json.Unmarshal(fm[field], &v) // a field that is no string reads as ""
	return v
}

// ListResult is one page of skills/list.
type ListResult struct {
	Skills     []*Skill `json:"skills"`
	NextCursor string   `json:"nextCursor,omitempty"`
}

// ListPage returns one page of skills/list, starting at cursor ("" for the first page). Listing
// reads no skill file.
func ListPage(ctx context.Context, c mcpclient.Caller, cursor string, opts ...mcpclient.CallOption) (*ListResult, error) {
	var res ListResult
	if _, err := extcall.Call(ctx, c, "skills/list", cursorParams{cursor}, &res, opts); err != nil {
		return nil, err
	}
	return &res, nil
}

// List iterates over every skill the server lists, fetching pages as needed; it yields the
// first error and stops. Listing reads no skill file.
func List(ctx context.Context, c mcpclient.Caller) iter.Seq2[*Skill, error] {
	return mcpclient.Paginate(ctx, func(ctx context.Context, cursor string) ([]*Skill, string, error) {
		page, err := ListPage(ctx, c, cursor)
		if err != nil {
			return nil, "", err
		}
		return page.Skills, page.NextCursor, nil
	})
}

// Get returns the entry of the skill whose SKILL.md is at uri, by skills/get. It reads no skill
// file. An answer that is no entry, or the entry of another skill, fails with
// mcpclient.CodeProtocol: the host would otherwise verify and load a skill it did not ask for.
func Get(ctx context.Context, c mcpclient.Caller, uri string, opts ...mcpclient.CallOption) (*Skill, error) {
	var res struct {
		Skill *Skill `json:"skill"`
	}
	resp, err := extcall.Call(ctx, c, "skills/get", uriParams{uri}, &res, opts)
	if err != nil {
		return nil, err
	}
	switch {
	case res.Skill == nil:
		return nil, &mcpclient.Error{Code: mcpclient.CodeProtocol, Request: resp.Request, Attempts: resp.Attempts,
			Err: errors.New("skills/get answered no skill")}
	case res.Skill.URI != uri:
		return nil, &mcpclient.Error{Code: mcpclient.CodeProtocol, Request: resp.Request, Attempts: resp.Attempts,
			Err: fmt.Errorf("skills/get for %s answered the skill %s", uri, res.Skill.URI)}
	}
	return res.Skill, nil
}

type cursorParams struct {
	Cursor string `json:"cursor,omitempty"`
}

type uriParams struct {
	URI string `json:"uri"`
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}

// ReadDirectoryResult is one page of resources/directory/read: the directory's direct children.
// A child that is a directory itself has the mimeType MIMETypeDirectory.
type ReadDirectoryResult struct {
	Resources  []*mcpclient.Resource `json:"resources"`
	NextCursor string                `json:"nextCursor,omitempty"`
}

type directoryParams struct {
	URI    string `json:"uri"`
	Cursor string `json:"cursor,omitempty"`
}

// ReadDirectoryPage returns one page of resources/directory/read of the directory at uri (a
// skill's directory, such as skill://pdf-processing), starting at cursor ("" for the first
// page). Only a server that declares the Skills extension with directoryRead has the method: to
// another the request is not sent, and the call fails with ErrDirectoryReadNotDeclared
// (mcpclient.CodeInvalidArgument). Without a live session it connects first, since the server's
// declaration decides. A page listing a child outside the directory, or whose URI could take a
// host descending into it elsewhere (dot segments, raw or encoded, an encoded slash, a
// backslash), fails with mcpclient.CodeProtocol.
func ReadDirectoryPage(ctx context.Context, c mcpclient.Caller, uri, cursor string, opts ...mcpclient.CallOption) (*ReadDirectoryResult, error) {
	init, err := c.Session(ctx)
	if err != nil {
		return nil, err
	}
	if decl, _ := CapabilitiesOf(init.Capabilities); !decl.DirectoryRead {
		return nil, &mcpclient.Error{Code: mcpclient.CodeInvalidArgument, Err: fmt.Errorf("%w: reading %s", ErrDirectoryReadNotDeclared, uri)}
	}
	var res ReadDirectoryResult
	resp, err := extcall.Call(ctx, c, "resources/directory/read", directoryParams{URI: uri, Cursor: cursor}, &res, opts)
	if err != nil {
		return nil, err
	}
	if err := checkChildren(uri, res.Resources); err != nil {
		return nil, &mcpclient.Error{Code: mcpclient.CodeProtocol, Request: resp.Request, Attempts: resp.Attempts, Err: err}
	}
	return &res, nil
}

// checkChildren checks that the children a server lists for the directory at dir are in it,
// their URIs compared in normal form, without what could take a host that descends into them
// elsewhere (see normalizeSkillURI).
func checkChildren(dir string, children []*mcpclient.Resource) error {
	norm, problem := normalizeSkillURI(strings.TrimSuffix(dir, "/"))
	for _, r := range children {
		if r == nil {
			return fmt.Errorf("resources/directory/read of %s listed a null child", dir)
		}
		child, childProblem := normalizeSkillURI(r.URI)
		switch {
		case childProblem != "":
			return fmt.Errorf("resources/directory/read of %s listed the child %s, whose URI has %s", dir, r.URI, childProblem)
		case problem == "" && !strings.HasPrefix(child, norm+"/"):
			return fmt.Errorf("resources/directory/read of %s listed the child %s, outside it", dir, r.URI)
		}
	}
	return nil
}

// ReadDirectory iterates over the children of the directory at uri, fetching pages as needed;
// it yields the first error and stops. See ReadDirectoryPage.
func ReadDirectory(ctx context.Context, c mcpclient.Caller, uri string) iter.Seq2[*mcpclient.Resource, error] {
	return mcpclient.Paginate(ctx, func(ctx context.Context, cursor string) ([]*mcpclient.Resource, string, error) {
		page, err := ReadDirectoryPage(ctx, c, uri, cursor)
		if err != nil {
			return nil, "", err
		}
		return page.Resources, page.NextCursor, nil
	})
}
