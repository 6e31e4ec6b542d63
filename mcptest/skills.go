package mcptest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/northstar-mcp/mcpclient"
)

// A Skill is a skill a server serves under the Skills extension (SEP-2640): its SKILL.md, made
// of a YAML frontmatter and a Markdown body, and the files beside it. See WithSkill.
type Skill struct {
	// Path locates the skill: its SKILL.md is at skill://<Path>/SKILL.md and its files are in
	// the directory skill://<Path>. Segments are separated by "/"; the final one is the skill's
	// name, frontmatter.name.
	Path string
	// Description is frontmatter.description, which the Agent Skills specification requires.
	Description string
	// Frontmatter holds the frontmatter's other fields (license, metadata, allowed-tools, ...):
	// any values that marshal to JSON. name and description come from Path and Description.
	Frontmatter map[string]any
	// Body is the Markdown that follows the frontmatter.
	Body string
	// Files are the skill's other files, by their path in its directory ("scripts/extract.py").
	Files map[string][]byte
}

// skillEntry is a skill as the server serves it.
type skillEntry struct {
	uri         string // of its SKILL.md
	dir         string // skill://<path>
	frontmatter json.RawMessage
	manifest    []manifestFile // SKILL.md first, then the files by path
}

// skillFile is one file of a served skill.
type skillFile struct {
	contents mcpclient.ResourceContents
	size     int64
}

// WithSkill makes the server serve s under the Skills extension, which it declares (with
// directoryRead): skills/list and skills/get describe each skill by an entry (the URI of its
// SKILL.md, its frontmatter as JSON, and the manifest of its files with their SHA-256 digests and
// sizes), resources/read serves the files, and resources/directory/read lists the children of a
// skill's directory and of its subdirectories. The SKILL.md is written from s, its frontmatter as
// YAML whose values are in JSON's notation (a subset of YAML's), so that the entry and the file
// agree; resources/list lists it (text/markdown, named and described as the frontmatter says), and
// not the skill's other files, which are served as text when they are UTF-8 and as blobs
// otherwise, with a mimeType guessed from their extension. skills/list pages as WithPageSize
// says.
//
// The extension's methods are served as those of WithMethod are: a later WithMethod for one of
// them replaces it. WithSkill panics on a skill it cannot serve: a Path or file path that is empty
// or has empty, "." or ".." segments, a file named SKILL.md at the top of the skill, a skill
// already registered under Path, or a frontmatter that does not marshal.
func WithSkill(s Skill) Option {
	return optionFunc(func(srv *Server) { srv.addSkillLocked(s) })
}

// skillURIPrefix is the scheme of skill URIs, as the extension names them.
const skillURIPrefix = "skill://"

// skillsExtension is the identifier of the Skills extension, which the server declares.
const skillsExtension = "io.modelcontextprotocol/skills"

// mimeTypeDirectory is the mimeType of a directory among the children
// resources/directory/read lists.
const mimeTypeDirectory = "inode/directory"

// manifestFile is one file of a skill's manifest, as an entry lists it.
type manifestFile struct {
	URI    string `json:"uri"`
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// directoryPage is one page of resources/directory/read.
type directoryPage struct {
	Resources  []*mcpclient.Resource `json:"resources"`
	NextCursor string                `json:"nextCursor,omitempty"`
}

func validSkillPath(p string) bool {
	if p == "" {
		return false
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

func (s *Server) addSkillLocked(sk Skill) {
	if !validSkillPath(sk.Path) {
		panic(fmt.Sprintf("mcptest: WithSkill: invalid skill path %q", sk.Path))
	}
	dir := skillURIPrefix + sk.Path
	if slices.ContainsFunc(s.skills, func(e *skillEntry) bool { return e.dir == dir }) {
		panic(fmt.Sprintf("mcptest: WithSkill: a skill is already registered under %q", sk.Path))
	}
	name := path.Base(sk.Path)
	fields := map[string]any{}
	for k, v := range sk.Frontmatter {
		fields[k] = v
	}
	fields["name"], fields["description"] = name, sk.Description
	fm, doc, err := renderSkillMD(fields, sk.Body)
	if err != nil {
		panic(fmt.Sprintf("mcptest: WithSkill %s: %v", sk.Path, err))
	}

	e := &skillEntry{uri: dir + "/SKILL.md", dir: dir, frontmatter: fm}
	files := map[string][]byte{"SKILL.md": doc}
	for p, b := range sk.Files {
		if !validSkillPath(p) || p == "SKILL.md" {
			panic(fmt.Sprintf("mcptest: WithSkill %s: invalid file path %q", sk.Path, p))
		}
		files[p] = b
	}
	if s.skillFiles == nil {
		s.skillFiles = make(map[string]*skillFile)
	}
	paths := slices.Sorted(func(yield func(string) bool) {
		for p := range files {
			if p != "SKILL.md" && !yield(p) {
				return
			}
		}
	})
	for _, p := range append([]string{"SKILL.md"}, paths...) {
		uri := dir + "/" + p
		b := files[p]
		sum := sha256.Sum256(b)
		e.manifest = append(e.manifest, manifestFile{URI: uri, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(b))})
		c := mcpclient.ResourceContents{URI: uri, MIMEType: skillMIMEType(p, b)}
		if utf8.Valid(b) {
			c.Text = string(b)
		} else {
			c.Blob = base64.StdEncoding.EncodeToString(b)
		}
		s.skillFiles[uri] = &skillFile{contents: c, size: int64(len(b))}
	}
	s.skills = append(s.skills, e)

	md := s.skillFiles[e.uri].contents
	size := int64(len(doc))
	addResourceLocked(s, mcpclient.Resource{URI: e.uri, Name: name, Description: sk.Description, MIMEType: md.MIMEType, Size: &size},
		func(context.Context, string) ([]mcpclient.ResourceContents, error) {
			return []mcpclient.ResourceContents{md}, nil
		})
	if s.extensions == nil {
		s.extensions = make(map[string]json.RawMessage)
	}
	s.extensions[skillsExtension] = json.RawMessage(`{"directoryRead":true}`)
	if s.methods == nil {
		s.methods = make(map[string]MethodFunc)
	}
	s.methods["skills/list"] = s.listSkills
	s.methods["skills/get"] = s.getSkill
	s.methods["resources/directory/read"] = s.readSkillDirectory
}

// skillMIMEType guesses the mimeType of a skill file from its name and bytes.
func skillMIMEType(p string, b []byte) string {
	switch ext := path.Ext(p); {
	case ext == ".md":
		return "text/markdown"
	case mime.TypeByExtension(ext) != "":
		t, _, _ := strings.Cut(mime.TypeByExtension(ext), ";")
		return t
	case utf8.Valid(b):
		return "text/plain"
	default:
		return "application/octet-stream"
	}
}

// renderSkillMD writes a SKILL.md: fields as a YAML frontmatter, name and description first, the
// others by name, each value in JSON's notation with a space after each separator, then the body.
// fm is the frontmatter as the JSON object the entry carries.
func renderSkillMD(fields map[string]any, body string) (fm json.RawMessage, doc []byte, err error) {
	raw, err := json.Marshal(fields)
	if err != nil {
		return nil, nil, err
	}
	// Through JSON, so that what the entry says and what the file says are the same values.
	var generic map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		return nil, nil, err
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range generic {
			if k != "name" && k != "description" && !yield(k) {
				return
			}
		}
	})
	var b bytes.Buffer
	b.WriteString("---\n")
	for _, k := range append([]string{"name", "description"}, keys...) {
		b.WriteString(k)
		b.WriteString(": ")
		writeFlow(&b, generic[k])
		b.WriteString("\n")
	}
	b.WriteString("---\n")
	b.WriteString(body)
	return raw, b.Bytes(), nil
}

// writeFlow writes v, a decoded JSON value, in JSON's notation with a space after each ":" and
// ",", as YAML's flow style reads it everywhere.
func writeFlow(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case map[string]any:
		b.WriteString("{")
		for i, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range v {
				if !yield(k) {
					return
				}
			}
		}) {
			if i > 0 {
				b.WriteString(", ")
			}
			writeFlow(b, k)
			b.WriteString(": ")
			writeFlow(b, v[k])
		}
		b.WriteString("}")
	case []any:
		b.WriteString("[")
		for i, e := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			writeFlow(b, e)
		}
		b.WriteString("]")
	default:
		j, _ := json.Marshal(v) // strings, json.Numbers, booleans and null
		b.Write(j)
	}
}

// skillEntryJSON is the entry of a skill on the wire.
type skillEntryJSON struct {
	URI         string          `json:"uri"`
	Frontmatter json.RawMessage `json:"frontmatter"`
	Resources   []manifestFile  `json:"resources"`
}

func (e *skillEntry) wire() skillEntryJSON {
	return skillEntryJSON{URI: e.uri, Frontmatter: e.frontmatter, Resources: e.manifest}
}

// listSkills serves skills/list.
func (s *Server) listSkills(_ context.Context, params json.RawMessage) (any, error) {
	var p struct {
		Cursor string `json:"cursor"`
	}
	if len(params) > 0 && json.Unmarshal(params, &p) != nil {
		return nil, &mcpclient.RPCError{Code: mcpclient.RPCInvalidParams, Message: "skills/list params must be an object"}
	}
	s.mu.Lock()
	entries, next, ok := page(s.skills, p.Cursor, s.pageSize)
	out := make([]skillEntryJSON, len(entries))
	for i, e := range entries {
		out[i] = e.wire()
	}
	s.mu.Unlock()
	if !ok {
		return nil, &mcpclient.RPCError{Code: mcpclient.RPCInvalidParams, Message: "invalid cursor"}
	}
	return struct {
		Skills     []skillEntryJSON `json:"skills"`
		NextCursor string           `json:"nextCursor,omitempty"`
	}{out, next}, nil
}

// getSkill serves skills/get.
func (s *Server) getSkill(_ context.Context, params json.RawMessage) (any, error) {
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(params, &p) != nil || p.URI == "" {
		return nil, &mcpclient.RPCError{Code: mcpclient.RPCInvalidParams, Message: "skills/get needs params with a uri"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.skills {
		if e.uri == p.URI {
			return struct {
				Skill skillEntryJSON `json:"skill"`
			}{e.wire()}, nil
		}
	}
	return nil, &mcpclient.RPCError{Code: mcpclient.RPCInvalidParams, Message: "unknown skill: " + p.URI,
		Data: json.RawMessage(`{"uri":` + strconv.Quote(p.URI) + `}`)}
}

// readSkillDirectory serves resources/directory/read: the direct children of a skill's
// directory, or of a directory in it, subdirectories first, each part by name.
func (s *Server) readSkillDirectory(_ context.Context, params json.RawMessage) (any, error) {
	var p struct {
		URI    string `json:"uri"`
		Cursor string `json:"cursor"`
	}
	if json.Unmarshal(params, &p) != nil || p.URI == "" {
		return nil, &mcpclient.RPCError{Code: mcpclient.RPCInvalidParams, Message: "resources/directory/read needs params with a uri"}
	}
	dir := strings.TrimSuffix(p.URI, "/")
	s.mu.Lock()
	var inSkill bool
	for _, e := range s.skills {
		inSkill = inSkill || dir == e.dir || strings.HasPrefix(dir, e.dir+"/")
	}
	subdirs := map[string]bool{}
	var files []string
	for uri := range s.skillFiles {
		rest, ok := strings.CutPrefix(uri, dir+"/")
		if !ok {
			continue
		}
		if sub, _, nested := strings.Cut(rest, "/"); nested {
			subdirs[sub] = true
		} else {
			files = append(files, rest)
		}
	}
	var children []*mcpclient.Resource
	for _, sub := range slices.Sorted(func(yield func(string) bool) {
		for d := range subdirs {
			if !yield(d) {
				return
			}
		}
	}) {
		children = append(children, &mcpclient.Resource{URI: dir + "/" + sub, Name: sub, MIMEType: mimeTypeDirectory})
	}
	slices.Sort(files)
	for _, f := range files {
		sf := s.skillFiles[dir+"/"+f]
		size := sf.size
		children = append(children, &mcpclient.Resource{URI: dir + "/" + f, Name: f, MIMEType: sf.contents.MIMEType, Size: &size})
	}
	pageSize := s.pageSize
	s.mu.Unlock()
	if !inSkill || len(children) == 0 {
		return nil, &mcpclient.RPCError{Code: mcpclient.RPCInvalidParams, Message: "not a directory: " + p.URI,
			Data: json.RawMessage(`{"uri":` + strconv.Quote(p.URI) + `}`)}
	}
	out, next, ok := page(children, p.Cursor, pageSize)
	if !ok {
		return nil, &mcpclient.RPCError{Code: mcpclient.RPCInvalidParams, Message: "invalid cursor"}
	}
	return directoryPage{Resources: out, NextCursor: next}, nil
}

// readSkillFile returns the contents of a skill file, or nil.
func (s *Server) readSkillFile(uri string) []mcpclient.ResourceContents {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.skillFiles[uri]; f != nil {
		return []mcpclient.ResourceContents{f.contents}
	}
	return nil
}
