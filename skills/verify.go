package skills

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/extcall"
)

// What the client checks of a skill's files. Before reading anything it checks the entry: a
// skill must have a well-formed manifest within the read's limits. Every file it reads is
// checked against its manifest entry, its size first and then its digest, and the skill's own
// SKILL.md also has its frontmatter compared with the entry's field by field. A file that fails
// a check is never returned: the caller gets a *VerificationError naming the file and the
// check, in a *mcpclient.Error with mcpclient.CodeSkillVerification.

// The limits the Skills extension sets on a skill, which WithLimits can change for a read: a
// skill whose manifest lists more files, or more bytes, is refused before any of its files is
// read, so that a server cannot make the client fetch without bound.
const (
	// DefaultMaxFiles bounds the files a skill's manifest may list, SKILL.md included.
	DefaultMaxFiles = 512
	// DefaultMaxBytes bounds the sizes of a skill's files, summed over its manifest: 16 MiB.
	DefaultMaxBytes = 16 << 20
)

// Errors of this package, found in the chain of the *mcpclient.Error a call returns.
var (
	// ErrVerification: a skill file was refused and its content not returned
	// (mcpclient.CodeSkillVerification): the skill's entry cannot vouch for it (no manifest, a
	// malformed one, one beyond the read's limits), or what the server sent differs from the
	// entry in size, digest or frontmatter. errors.As gives the *VerificationError.
	ErrVerification = errors.New("skills: skill verification failed")
	// ErrUnverifiable reports, besides ErrVerification, the files of a skill whose server
	// publishes no manifest of them ("dynamic"): nothing vouches for what they hold. See
	// WithUnverifiableFiles.
	ErrUnverifiable = errors.New("skills: the skill has no manifest to verify its files against")
	// ErrDirectoryReadNotDeclared reports a resources/directory/read that was not sent, with
	// mcpclient.CodeInvalidArgument, because the server does not declare the Skills extension
	// with directoryRead.
	ErrDirectoryReadNotDeclared = errors.New("skills: the server does not declare resources/directory/read")
)

// An Option configures the reading of a skill's files (Load, ReadFile, Files).
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	unverifiable bool
	// maxFiles and maxBytes are the limits of WithLimits; 0 keeps the default.
	maxFiles int
	maxBytes int64
	// invalid says why an option cannot be used; the read is refused before anything is sent.
	invalid string
}

// WithLimits sets the limits of the skill whose files are read: at most maxFiles files in its
// manifest, SKILL.md included, and at most maxBytes bytes summed over them. A skill beyond
// either is refused before any of its files is read (CheckLimits). A limit of 0 keeps its
// default; a negative one fails the read with mcpclient.CodeInvalidArgument, before anything is
// sent. Default: DefaultMaxFiles and DefaultMaxBytes, the limits the Skills extension sets for
// servers.
func WithLimits(maxFiles int, maxBytes int64) Option {
	return optionFunc(func(c *config) {
		if maxFiles < 0 || maxBytes < 0 {
			c.invalid = fmt.Sprintf("WithLimits(%d, %d): a negative limit", maxFiles, maxBytes)
			return
		}
		c.maxFiles, c.maxBytes = maxFiles, maxBytes
	})
}

// limits returns the limits in force.
func (c *config) limits() (maxFiles int, maxBytes int64) {
	maxFiles, maxBytes = DefaultMaxFiles, DefaultMaxBytes
	if c.maxFiles > 0 {
		maxFiles = c.maxFiles
	}
	if c.maxBytes > 0 {
		maxBytes = c.maxBytes
	}
	return maxFiles, maxBytes
}

// WithUnverifiableFiles accepts the files of a skill that publishes no manifest (Dynamic):
// they are returned with Verified false, having been checked for nothing but, for SKILL.md, its
// frontmatter against the entry's, and for a URI within the skill's directory. Without it the
// files of such a skill are refused before anything is read, with ErrUnverifiable. Files of a
// skill that has a manifest are verified whatever the option.
func WithUnverifiableFiles() Option {
	return optionFunc(func(c *config) { c.unverifiable = true })
}

// Check names a check of a skill's files against its entry.
type Check string

// The checks, in the order they are made.
const (
	// CheckDynamic: the skill publishes no manifest ("resources": "dynamic"), so its
	// files cannot be verified; see WithUnverifiableFiles. Found before anything is read.
	CheckDynamic Check = "dynamic"
	// CheckManifest: the entry cannot vouch for the file: it has no manifest, or a
	// malformed one (a frontmatter that is no object, a digest not of the form sha256:{64 hex},
	// a negative size, a file listed twice or outside the skill's directory, no entry for
	// SKILL.md), or its manifest does not list the file, or the URI of the skill or the file
	// could take the server out of the skill's directory (dot segments, raw or
	// percent-encoded; an encoded slash or backslash; a backslash; an encoded percent sign; an
	// empty segment). Found before anything is read.
	CheckManifest Check = "manifest"
	// CheckLimits: the manifest lists more files, or more bytes, than the read's limits
	// (WithLimits). Found before anything is read.
	CheckLimits Check = "limits"
	// CheckContent: the server's answer to resources/read holds no usable content for the
	// file (none for its URI, both text and a blob, a blob that is no base64).
	CheckContent Check = "content"
	// CheckSize: the file's length differs from the size in the manifest. It is checked
	// before the digest, which is then not computed.
	CheckSize Check = "size"
	// CheckDigest: the file's SHA-256 digest differs from the one in the manifest.
	CheckDigest Check = "digest"
	// CheckFrontmatter: the skill's SKILL.md has no YAML frontmatter, one that does not
	// parse as a mapping, one beyond the client's bounds (longer than 64 KiB, collections
	// nested deeper than 32, aliases standing for more than 65536 values, merge keys, tags),
	// or one that differs from the entry's frontmatter in a field (Field). A context that ends
	// during the parse stops it, with the context's error in the chain.
	CheckFrontmatter Check = "frontmatter"
)

// VerificationError reports a skill file the client refused, and why. It is the cause of
// a *mcpclient.Error with mcpclient.CodeSkillVerification: errors.As finds it, and errors.Is matches
// ErrVerification, and ErrUnverifiable too for CheckDynamic.
type VerificationError struct {
	// Skill is the URI of the skill's SKILL.md, as its entry gives it.
	Skill string
	// File is the URI of the file refused; "" when the check is of the whole skill (its
	// manifest, its limits).
	File string
	// Check is the check that failed.
	Check Check
	// Field is, for CheckFrontmatter, the first field (in sorted order) whose value differs.
	Field string
	// Want and Got are, for people, what the entry says and what the client found: sizes,
	// digests, frontmatter values as JSON, limits. Empty where the check has none.
	Want, Got string
	// Err is the underlying cause, such as the YAML parser's error; may be nil.
	Err error
}

func (e *VerificationError) Error() string {
	var b strings.Builder
	b.WriteString("skill ")
	b.WriteString(e.Skill)
	if e.File != "" && e.File != e.Skill {
		b.WriteString(", file ")
		b.WriteString(e.File)
	}
	fmt.Fprintf(&b, ": the %s check failed", e.Check)
	if e.Field != "" {
		fmt.Fprintf(&b, " for field %q", e.Field)
	}
	if e.Want != "" || e.Got != "" {
		fmt.Fprintf(&b, ": want %s, got %s", e.Want, e.Got)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *VerificationError) Unwrap() error { return e.Err }

// Is matches ErrVerification, and ErrUnverifiable for a skill without a manifest.
func (e *VerificationError) Is(target error) bool {
	return target == ErrVerification || (target == ErrUnverifiable && e.Check == CheckDynamic)
}

// FileContent is a skill file as the client read and checked it.
type FileContent struct {
	// URI is the file's resource URI.
	URI string
	// MIMEType is the mimeType the server gave the content, if any.
	MIMEType string
	// Data is the file's bytes: the text the server sent, or its blob decoded.
	Data []byte
	// Verified: Data matched the file's size and digest in the manifest. It is false only for
	// a file of a skill without a manifest, read with WithUnverifiableFiles.
	Verified bool
}

// Load reads the skill's SKILL.md and checks it against the entry: its size and digest against
// the manifest, its frontmatter against the entry's field by field. It reads nothing else: the
// skill's other files stay on the server until ReadFile or Files asks for them. See ReadFile for
// the checks and errors.
func Load(ctx context.Context, c mcpclient.Caller, skill *Skill, opts ...Option) (*FileContent, error) {
	if skill == nil {
		return nil, &mcpclient.Error{Code: mcpclient.CodeInvalidArgument, Err: errors.New("skills.Load: nil skill")}
	}
	return ReadFile(ctx, c, skill, skill.URI, opts...)
}

// ReadFile reads the file at uri of skill, with resources/read, and returns it once it
// passed every check (see Check). Before reading it checks the entry: a skill without a
// manifest (Dynamic) is refused unless WithUnverifiableFiles is given, as are a malformed
// manifest, one beyond the read's limits (WithLimits), and a file the manifest does not
// list; nothing is read then. The file read must have the size the manifest gives it, then its
// digest; the skill's SKILL.md must also have a YAML frontmatter equal to the entry's, field by
// field. Content that fails a check is not returned: the error is a *mcpclient.Error with
// mcpclient.CodeSkillVerification (ErrVerification) whose cause is a *VerificationError naming
// the file and the check. A failed resources/read returns its own *mcpclient.Error.
func ReadFile(ctx context.Context, c mcpclient.Caller, skill *Skill, uri string, opts ...Option) (*FileContent, error) {
	p, err := planSkill(skill, opts)
	if err != nil {
		return nil, err
	}
	return readFile(ctx, c, p, uri)
}

// Files iterates over the files of skill, reading each, with resources/read, when the loop
// asks for it: SKILL.md first, then the others in the order of the manifest; it yields the first
// error and stops. The entry is checked before the first read, and each file as ReadFile checks
// it. Of a skill without a manifest read WithUnverifiableFiles it yields SKILL.md alone: there is
// no list of the other files to follow (ReadDirectory may give one).
func Files(ctx context.Context, c mcpclient.Caller, skill *Skill, opts ...Option) iter.Seq2[*FileContent, error] {
	return func(yield func(*FileContent, error) bool) {
		p, err := planSkill(skill, opts)
		if err != nil {
			yield(nil, err)
			return
		}
		for _, uri := range p.order() {
			f, err := readFile(ctx, c, p, uri)
			if !yield(f, err) || err != nil {
				return
			}
		}
	}
}

// A skillPlan is what the checks of an entry found before anything is read.
type skillPlan struct {
	skill *Skill
	uri   string // the skill's URI in normal form (normalizeSkillURI)
	dir   string // the skill's directory URI in normal form with a trailing slash: the prefix of its files
	// files are the manifest by URI; nil for a skill without one read unverified.
	files       map[string]File
	frontmatter map[string]any // the entry's, decoded with json.Number
}

// skillMD is the name of the file that describes a skill, at the root of its directory.
const skillMD = "SKILL.md"

// planSkill checks the entry of skill, before any of its files is read: its URI, frontmatter,
// manifest and limits.
func planSkill(skill *Skill, opts []Option) (*skillPlan, error) {
	if skill == nil {
		return nil, &mcpclient.Error{Code: mcpclient.CodeInvalidArgument, Err: errors.New("no skill given")}
	}
	var cfg config
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if cfg.invalid != "" {
		return nil, &mcpclient.Error{Code: mcpclient.CodeInvalidArgument, Err: errors.New(cfg.invalid)}
	}
	refuse := func(check Check, file, want, got string, err error) error {
		return &mcpclient.Error{Code: mcpclient.CodeSkillVerification, Err: &VerificationError{Skill: skill.URI, File: file, Check: check, Want: want, Got: got, Err: err}}
	}
	uri, problem := normalizeSkillURI(skill.URI)
	if problem != "" {
		return nil, refuse(CheckManifest, "", "", "", fmt.Errorf("the skill's URI has %s", problem))
	}
	dir, ok := strings.CutSuffix(uri, "/"+skillMD)
	if !ok || dir == "" || strings.HasSuffix(dir, "/") {
		return nil, refuse(CheckManifest, "", "", "", fmt.Errorf("the skill's URI names no %s", skillMD))
	}
	p := &skillPlan{skill: skill, uri: uri, dir: dir + "/"}
	fm, err := decodeObject(skill.Frontmatter)
	if err != nil {
		return nil, refuse(CheckManifest, "", "", "", fmt.Errorf("the entry's frontmatter: %w", err))
	}
	p.frontmatter = fm
	switch {
	case skill.Dynamic && cfg.unverifiable:
		return p, nil
	case skill.Dynamic:
		return nil, refuse(CheckDynamic, "", "", "", errors.New("the server publishes no manifest of the skill's files"))
	case skill.manifestErr != nil:
		return nil, refuse(CheckManifest, "", "", "", skill.manifestErr)
	case skill.Files == nil:
		return nil, refuse(CheckManifest, "", "", "", errors.New("the entry has no manifest"))
	}
	maxFiles, maxBytes := cfg.limits()
	if n := len(skill.Files); n > maxFiles {
		return nil, refuse(CheckLimits, "", fmt.Sprintf("at most %d files", maxFiles), fmt.Sprintf("%d files", n), nil)
	}
	p.files = make(map[string]File, len(skill.Files))
	listed := make(map[string]bool, len(skill.Files)) // by normal form
	var total int64
	for _, f := range skill.Files {
		norm, uriProblem := normalizeSkillURI(f.URI)
		var problem string
		switch {
		case uriProblem != "":
			problem = "the file's URI has " + uriProblem
		case listed[norm]:
			problem = "the manifest lists the file twice"
		case norm != p.uri && !strings.HasPrefix(norm, p.dir):
			problem = "the file is outside the skill's directory " + dir
		case f.Size < 0:
			problem = fmt.Sprintf("the manifest gives the file a negative size, %d", f.Size)
		case !validDigest(f.Digest):
			problem = fmt.Sprintf("the manifest gives the file the digest %q, not sha256:{64 lowercase hex digits}", f.Digest)
		}
		if problem != "" {
			return nil, refuse(CheckManifest, f.URI, "", "", errors.New(problem))
		}
		p.files[f.URI] = f
		listed[norm] = true
		// Compared before adding, as total never exceeds maxBytes: a size near the largest
		// int64 cannot wrap the sum around.
		if f.Size > maxBytes-total {
			got := "more than 2^63 bytes"
			if f.Size <= math.MaxInt64-total {
				got = fmt.Sprintf("%d bytes or more", total+f.Size)
			}
			return nil, refuse(CheckLimits, "", fmt.Sprintf("at most %d bytes", maxBytes), got, nil)
		}
		total += f.Size
	}
	if _, ok := p.files[skill.URI]; !ok {
		return nil, refuse(CheckManifest, skill.URI, "", "", fmt.Errorf("the manifest does not list the skill's %s", skillMD))
	}
	return p, nil
}

// order returns the URIs of the files Files reads, in the order it reads them.
func (p *skillPlan) order() []string {
	uris := []string{p.skill.URI}
	if p.files == nil {
		return uris
	}
	for _, f := range p.skill.Files {
		if f.URI != p.skill.URI {
			uris = append(uris, f.URI)
		}
	}
	return uris
}

// entry returns the manifest's entry for uri, or nil for a file of a skill read unverified;
// an error when the client must not read the file.
func (p *skillPlan) entry(uri string) (*File, error) {
	var why string
	if p.files != nil {
		f, ok := p.files[uri]
		if ok {
			return &f, nil
		}
		why = "the manifest does not list the file"
	} else if norm, problem := normalizeSkillURI(uri); problem != "" {
		why = "the file's URI has " + problem
	} else if norm == p.uri || strings.HasPrefix(norm, p.dir) {
		return nil, nil
	} else {
		why = "the file is outside the skill's directory " + strings.TrimSuffix(p.dir, "/")
	}
	return nil, &mcpclient.Error{Code: mcpclient.CodeSkillVerification, Err: &VerificationError{
		Skill: p.skill.URI, File: uri, Check: CheckManifest, Err: errors.New(why)}}
}

// readFile reads one file of a checked skill and checks it.
func readFile(ctx context.Context, c mcpclient.Caller, p *skillPlan, uri string) (*FileContent, error) {
	entry, err := p.entry(uri)
	if err != nil {
		return nil, err
	}
	var res mcpclient.ReadResourceResult
	resp, err := extcall.Call(ctx, c, "resources/read", uriParams{uri}, &res, nil)
	if err != nil {
		return nil, err
	}
	f, verr := p.verify(ctx, uri, entry, res.Contents)
	if verr != nil {
		return nil, &mcpclient.Error{Code: mcpclient.CodeSkillVerification, Request: resp.Request, Attempts: resp.Attempts, Err: verr}
	}
	return f, nil
}

// verify checks the contents the server sent for the file at uri against its manifest entry
// (nil: none, the skill is read unverified), and the frontmatter of the skill's SKILL.md against
// the entry's.
func (p *skillPlan) verify(ctx context.Context, uri string, entry *File, contents []mcpclient.ResourceContents) (*FileContent, *VerificationError) {
	fail := func(check Check, want, got string, err error) *VerificationError {
		return &VerificationError{Skill: p.skill.URI, File: uri, Check: check, Want: want, Got: got, Err: err}
	}
	i := slices.IndexFunc(contents, func(c mcpclient.ResourceContents) bool { return c.URI == uri })
	if i < 0 && len(contents) == 1 {
		i = 0 // a server that names the content otherwise, but sent nothing else
	}
	if i < 0 {
		return nil, fail(CheckContent, "", "", fmt.Errorf("resources/read answered %d contents, none for the file", len(contents)))
	}
	rc := contents[i]
	if rc.Text != "" && rc.Blob != "" {
		return nil, fail(CheckContent, "", "", errors.New("the content has both text and a blob"))
	}
	// The size is known before anything is decoded or hashed: a file of the wrong length is
	// refused without further work.
	size := int64(len(rc.Text))
	if rc.Blob != "" {
		n, ok := decodedLen(rc.Blob)
		if !ok {
			return nil, fail(CheckContent, "", "", errors.New("the blob is no base64"))
		}
		size = n
	}
	if entry != nil && size != entry.Size {
		return nil, fail(CheckSize, fmt.Sprintf("%d bytes", entry.Size), fmt.Sprintf("%d bytes", size), nil)
	}
	data := []byte(rc.Text)
	if rc.Blob != "" {
		var err error
		if data, err = decodeBase64(rc.Blob); err != nil {
			return nil, fail(CheckContent, "", "", fmt.Errorf("the blob is no base64: %w", err))
		}
	}
	if entry != nil {
		sum := sha256.Sum256(data)
		if got := "sha256:" + hex.EncodeToString(sum[:]); got != entry.Digest {
			return nil, fail(CheckDigest, entry.Digest, got, nil)
		}
	}
	if norm, _ := normalizeSkillURI(uri); uri == p.skill.URI || norm == p.uri {
		if e := compareFrontmatter(ctx, data, p.frontmatter); e != nil {
			e.Skill, e.File = p.skill.URI, uri
			return nil, e
		}
	}
	return &FileContent{URI: uri, MIMEType: rc.MIMEType, Data: data, Verified: entry != nil}, nil
}

// normalizeSkillURI returns uri, the URI of a skill or of one of its files, in the normal form
// the client compares to find whether a file is in the skill's directory: the
// percent-encodings of unreserved characters decoded, the others in capitals (RFC 3986
// §6.2.2). problem, when not "", says why the client cannot tell where the server would take
// uri, and refuses it.
//
// Dot segments are refused rather than removed (RFC 3986 §5.2.4): the server resolves the URI
// it is sent, not the client's normal form of it, and may resolve "a/.." through a link named
// a, or let ".." climb out of the authority of skill://name/.., which the RFC's removal keeps.
// So are what a server may decode into a separator or a dot segment after the client looked:
// an encoded slash or backslash, a backslash, an encoded percent sign (a second decoding), and
// an empty segment, which joins a path as an absolute one in some languages.
func normalizeSkillURI(uri string) (norm string, problem string) {
	var b strings.Builder
	b.Grow(len(uri))
	for i := 0; i < len(uri); i++ {
		c := uri[i]
		switch {
		case c == '\\':
			return "", "a backslash"
		case c < 0x20 || c == 0x7f:
			return "", "a control character"
		case c == '?' || c == '#':
			return "", "a query or a fragment"
		case c != '%':
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(uri) || unhex(uri[i+1]) < 0 || unhex(uri[i+2]) < 0 {
			return "", "a malformed percent-encoding"
		}
		d := byte(unhex(uri[i+1])<<4 | unhex(uri[i+2]))
		i += 2
		switch {
		case d == '/' || d == '\\':
			return "", "an encoded slash or backslash"
		case d == '%':
			return "", "an encoded percent sign"
		case d < 0x20 || d == 0x7f:
			return "", "an encoded control character"
		case 'a' <= d && d <= 'z' || 'A' <= d && d <= 'Z' || '0' <= d && d <= '9' || d == '-' || d == '.' || d == '_' || d == '~':
			b.WriteByte(d)
		default:
			fmt.Fprintf(&b, "%%%02X", d)
		}
	}
	norm = b.String()
	// The segments after the scheme, the authority among them: a server that maps the URI to a
	// path may take the authority for a directory.
	rest := norm
	if i := strings.IndexByte(rest, ':'); i >= 0 {
		rest = rest[i+1:]
	}
	rest = strings.TrimPrefix(rest, "//")
	for i, seg := range strings.Split(rest, "/") {
		switch {
		case seg == "." || seg == "..":
			return "", "a dot segment"
		case seg == "" && i > 0:
			return "", "an empty segment"
		}
	}
	return norm, ""
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}

// validDigest reports whether d is a SHA-256 digest as the manifest writes it.
func validDigest(d string) bool {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 2*sha256.Size {
		return false
	}
	for i := range len(h) {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// decodedLen returns the length of the bytes base64 text s decodes to, padded or not, without
// decoding it; ok is false when no base64 text has the length of s.
func decodedLen(s string) (n int64, ok bool) {
	if len(s)%4 == 0 {
		pad := len(s) - len(strings.TrimRight(s, "="))
		if pad > 2 {
			return 0, false
		}
		return int64(len(s)/4*3 - pad), true
	}
	if len(s)%4 == 1 {
		return 0, false
	}
	return int64(len(s)/4*3 + len(s)%4 - 1), true
}

func decodeBase64(s string) ([]byte, error) {
	if len(s)%4 == 0 {
		return base64.StdEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// decodeObject decodes raw, which must be a JSON object, keeping its numbers as spelled.
func decodeObject(raw json.RawMessage) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil || m == nil {
		return nil, fmt.Errorf("%s is no JSON object", truncate(raw, 40))
	}
	return m, nil
}

// SplitFrontmatter splits a SKILL.md into its YAML frontmatter and its body. The frontmatter is
// the text between a first line "---" (after an optional byte order mark) and the next line
// that is "---", optionally followed by spaces and tabs; lines end with "\n" or "\r\n". ok is
// false when doc has no such block; frontmatter and body are then nil. The split is the one the
// MCP conformance suite makes, so that a host and the suite agree on which bytes are the
// frontmatter.
func SplitFrontmatter(doc []byte) (frontmatter, body []byte, ok bool) {
	rest := bytes.TrimPrefix(doc, []byte("\uFEFF"))
	rest, found := bytes.CutPrefix(rest, []byte("---"))
	if !found {
		return nil, nil, false
	}
	if r, crlf := bytes.CutPrefix(rest, []byte("\r")); crlf {
		rest = r
	}
	rest, found = bytes.CutPrefix(rest, []byte("\n"))
	if !found {
		return nil, nil, false
	}
	for i := 0; i < len(rest); i++ {
		j := bytes.IndexByte(rest[i:], '\n')
		if j < 0 {
			break
		}
		nl := i + j
		i = nl
		after, found := bytes.CutPrefix(rest[nl+1:], []byte("---"))
		if !found {
			continue
		}
		after = bytes.TrimLeft(after, " \t")
		switch {
		case len(after) == 0:
		case after[0] == '\n':
			after = after[1:]
		case len(after) > 1 && after[0] == '\r' && after[1] == '\n':
			after = after[2:]
		default:
			continue
		}
		end := nl
		if end > 0 && rest[end-1] == '\r' {
			end--
		}
		return rest[:end:end], after, true
	}
	return nil, nil, false
}

// maxShown bounds a value shown in an error: the YAML of a hostile frontmatter can stand for a
// value far larger than itself (aliases of aliases).
const maxShown = 120

// compareFrontmatter compares the YAML frontmatter of doc, a SKILL.md, with want, the entry's
// frontmatter: field by field, a field one of them lacks counting as null. A value compares
// equal as JSON values do: numbers by value, objects by their members.
func compareFrontmatter(ctx context.Context, doc []byte, want map[string]any) *VerificationError {
	fail := func(field, w, g string, err error) *VerificationError {
		return &VerificationError{Check: CheckFrontmatter, Field: field, Want: w, Got: g, Err: err}
	}
	text, _, ok := SplitFrontmatter(doc)
	if !ok {
		return fail("", "", "", fmt.Errorf("%s begins with no frontmatter block", skillMD))
	}
	got, err := parseFrontmatter(ctx, text)
	if err != nil {
		return fail("", "", "", err)
	}
	fields := make([]string, 0, len(want)+len(got))
	for k := range want {
		fields = append(fields, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			fields = append(fields, k)
		}
	}
	slices.Sort(fields)
	for _, k := range fields {
		if !sameValue(want[k], got[k]) {
			return fail(k, show(want[k]), show(got[k]), nil)
		}
	}
	return nil
}

// sameValue reports whether got, a value the YAML parser made, equals want, a JSON value
// decoded with json.Number. The walk follows want, a tree the size of the entry: got may share
// its parts (YAML aliases) and stand for a much larger tree, which is never walked whole.
func sameValue(want, got any) bool {
	switch w := want.(type) {
	case nil:
		return got == nil
	case bool:
		g, ok := got.(bool)
		return ok && g == w
	case string:
		switch g := got.(type) {
		case string:
			return g == w
		}
		return false
	case json.Number:
		return sameNumber(w, got)
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !sameValue(w[i], g[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok || !sameValue(wv, gv) {
				return false
			}
		}
		return true
	}
	return false
}

// sameNumber compares a JSON number with a YAML one: exactly when both are integers, as
// float64 values otherwise, as a JavaScript host would.
func sameNumber(w json.Number, got any) bool {
	var gi *big.Int
	var gf float64
	switch g := got.(type) {
	case *big.Int:
		gi = g
	case float64:
		gf = g
	default:
		return false
	}
	s := w.String()
	if gi != nil && !strings.ContainsAny(s, ".eE") {
		wi, ok := new(big.Int).SetString(s, 10)
		return ok && wi.Cmp(gi) == 0
	}
	if gi != nil {
		gf, _ = new(big.Float).SetInt(gi).Float64()
	}
	wf, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return false
	}
	return !math.IsNaN(gf) && wf == gf
}

// show renders v, a JSON or YAML value, as JSON for an error message, cut at maxShown bytes.
func show(v any) string {
	var b strings.Builder
	showTo(&b, v)
	if b.Len() > maxShown {
		return b.String()[:maxShown] + "…"
	}
	return b.String()
}

// showTo writes v to b until b holds more than maxShown bytes: every step writes a byte at
// least, so a value that aliases make huge costs no more than that.
func showTo(b *strings.Builder, v any) {
	if b.Len() > maxShown {
		return
	}
	switch v := v.(type) {
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if showTo(b, e); b.Len() > maxShown {
				return
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			showTo(b, k)
			b.WriteByte(':')
			if showTo(b, v[k]); b.Len() > maxShown {
				return
			}
		}
		b.WriteByte('}')
	default:
		j, err := json.Marshal(v)
		if err != nil {
			fmt.Fprintf(b, "%v", v) // NaN, an infinity
			return
		}
		b.Write(j)
	}
}
