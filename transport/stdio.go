package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// ErrProcessExited reports that the server process of a [Command] connection exited. The
// Receiver is told it, in a [*ProcessExitError], when the connection ends because the process
// did; Sends that follow are NotDelivered.
var ErrProcessExited = errors.New("transport: server process exited")

// ProcessExitError describes the exit of a [Command]'s server process: its status, and the last
// lines it wrote to stderr, which usually say why a server exits at once (a bad flag, a missing
// file, a crash). errors.Is(err, ErrProcessExited) holds for it, and errors.As finds the
// *exec.ExitError of a status other than 0.
type ProcessExitError struct {
	// Pid is the process's id.
	Pid int
	// Wait is what waiting for the process returned: an *exec.ExitError for a non-zero status or
	// a signal, nil for exit status 0.
	Wait error
	// Stderr is the end of what the process wrote to stderr: its last lines, at most 10 and
	// 2 KiB, without the final newline; "…" starts it when earlier output was left out. It is
	// empty when the process wrote nothing there.
	Stderr string
}

func (e *ProcessExitError) Error() string {
	status := "exit status 0"
	if e.Wait != nil {
		status = e.Wait.Error()
	}
	if e.Stderr == "" {
		return fmt.Sprintf("%v: %s", ErrProcessExited, status)
	}
	// Quoted: the text is the server's, and may hold line breaks or control characters.
	return fmt.Sprintf("%v: %s; stderr ended with %q", ErrProcessExited, status, e.Stderr)
}

// Unwrap returns ErrProcessExited and, if set, Wait.
func (e *ProcessExitError) Unwrap() []error {
	if e.Wait == nil {
		return []error{ErrProcessExited}
	}
	return []error{ErrProcessExited, e.Wait}
}

// Default shutdown timeouts of a [Command] connection.
const (
	DefaultCloseTimeout = 5 * time.Second
	DefaultTermTimeout  = 5 * time.Second
)

// Command is a Transport that spawns an MCP server and speaks newline-delimited JSON-RPC over
// its stdin and stdout, as described at [Stream]. Each Connect spawns a new process: a new
// session, whose receipts (if any) die with it.
//
// On Unix the process runs in a process group of its own, so that shutdown signals reach what
// it started too, and the transport leaves no orphans: when the server process exits, for
// whatever reason, anything still running in its group is killed (SIGKILL; on Linux before the
// server is reaped, so that its group id cannot have been reused). A descendant that leaves the
// group (setsid, setpgid) is out of reach; if it holds the server's stdout or stderr open, it
// delays neither the report of the connection's end (after the exit, stdout is read only while
// data keeps coming) nor Close.
//
// The server's exit ends the connection: the Receiver is told a [*ProcessExitError] naming the
// exit status and the last lines of the server's stderr, every request awaiting an answer
// becomes uncertain (the client does that when it is told), and a Send afterwards is
// NotDelivered with the same error. A process that exits closes its stdin a moment before its
// exit can be known: a Send whose write fails waits for the exit up to a second (and within its
// context), so that it reports the exit rather than a broken pipe. The Conn must still be
// closed, which the client does when it is told the connection ended.
//
// Close shuts the server down as the MCP stdio transport recommends: it closes the server's
// stdin, waits up to CloseTimeout for the process to exit, then sends SIGTERM to the process
// group, waits up to TermTimeout, then sends SIGKILL to the group. It always waits for the
// process (no zombie) and for the goroutine copying stderr. Close returns nil when the process
// exited by itself (after stdin closed, or earlier), whatever its exit status: the status of an
// earlier exit was reported to the Receiver, and a server may well exit non-zero on a closed
// stdin.
// It returns an error when the process had to be signaled; the process is gone all the same.
//
// On systems without process groups (Windows), SIGTERM and SIGKILL are both replaced by
// killing the process itself.
type Command struct {
	// Path is the program to run; without a path separator it is looked up in PATH.
	Path string
	// Args are the arguments, without the program name.
	Args []string
	// Env is the environment of the process; nil inherits the current environment.
	Env []string
	// Dir is the working directory; empty means the current one.
	Dir string

	// Stderr is where the server's stderr goes. If nil and Logger is set, each stderr line is
	// logged at Info level with the attribute "stderr"; if both are nil, stderr is discarded.
	// Whatever it is, a goroutine of the connection reads the server's stderr from a pipe, to
	// keep its last lines for the report of the process's exit, and writes it to Stderr; Close
	// waits for that goroutine, so Stderr must not block forever. A Stderr that fails is not
	// written again, and the server's stderr is still read.
	Stderr io.Writer
	// Logger, if set, receives the server's stderr (see Stderr) and warnings about messages
	// over MaxFrameSize.
	Logger *slog.Logger

	// MaxFrameSize bounds an incoming line in bytes, without its line terminator; <= 0 means
	// DefaultMaxMessageSize (64 MiB). Stream says what becomes of a longer line.
	MaxFrameSize int

	// CloseTimeout is how long Close waits, after closing stdin, for the process to exit
	// before it sends SIGTERM; <= 0 means DefaultCloseTimeout (5s).
	CloseTimeout time.Duration
	// TermTimeout is how long Close waits after SIGTERM before it sends SIGKILL; <= 0 means
	// DefaultTermTimeout (5s).
	TermTimeout time.Duration
}

// Connect starts the server process and returns a Conn over its stdin and stdout, whose reader
// delivers to r. ctx bounds only the start: it does not stop the process later. If ctx is
// already done, nothing is started. A failure to start (no such file, permission denied) is a
// NotDelivered *Error.
func (c *Command) Connect(ctx context.Context, r Receiver) (Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, &Error{Outcome: NotDelivered, Err: err}
	}
	if c.Path == "" {
		return nil, &Error{Outcome: NotDelivered, Err: fmt.Errorf("%w: Command.Path is empty", ErrMisconfigured)}
	}
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env = c.Env
	cmd.Dir = c.Dir
	cmd.SysProcAttr = sysProcAttr()

	// The parent's ends of the pipes, and the child's ends, which the parent closes once the
	// child has them. os.Pipe files are pollable, so deadlines and Close interrupt them.
	var parent, child []*os.File
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			f.Close()
		}
	}
	fail := func(err error) (Conn, error) {
		closeAll(parent)
		closeAll(child)
		return nil, &Error{Outcome: NotDelivered, Err: fmt.Errorf("starting %s: %w", c.Path, err)}
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	parent, child = append(parent, stdinW), append(child, stdinR)
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	parent, child = append(parent, stdoutR), append(child, stdoutW)
	cmd.Stdin, cmd.Stdout = stdinR, stdoutW

	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	parent, child = append(parent, stderrR), append(child, stderrW)
	cmd.Stderr = stderrW
	stderr, logger := c.Stderr, c.Logger

	if err := ctx.Err(); err != nil {
		closeAll(parent)
		closeAll(child)
		return nil, &Error{Outcome: NotDelivered, Err: err}
	}
	if err := cmd.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			err = fmt.Errorf("%w: %w", ErrMisconfigured, err)
		}
		return fail(err)
	}
	closeAll(child)

	p := &stdioConn{
		cmd:          cmd,
		pid:          cmd.Process.Pid,
		stdout:       stdoutR,
		stderr:       stderrR,
		exited:       make(chan struct{}),
		stderrDone:   make(chan struct{}),
		closing:      make(chan struct{}),
		closeTimeout: c.CloseTimeout,
		termTimeout:  c.TermTimeout,
	}
	if p.closeTimeout <= 0 {
		p.closeTimeout = DefaultCloseTimeout
	}
	if p.termTimeout <= 0 {
		p.termTimeout = DefaultTermTimeout
	}
	hooks := streamHooks{ended: p.streamEnded}
	if logger != nil {
		hooks.oversized = func(n int, ids []string, named bool) {
			msg := "transport: dropped a request or notification from the server over the size limit"
			switch {
			case !named:
				msg = "transport: a message from the server over the size limit names no request it may answer; ending the connection"
			case len(ids) > 0:
				msg = "transport: an answer from the server over the size limit ends its request"
			}
			logger.Warn(msg, "err", ErrMessageTooLarge, "pid", p.pid, "bytes", n, "limit", p.stream.max, "ids", ids)
		}
	}
	p.stream = newStreamConn(&stdoutReader{f: stdoutR}, stdinW, stdinW.Close, c.MaxFrameSize, r, hooks)
	p.stderrReader.src = stderrR
	go p.stream.readLoop()
	go p.wait()
	if stderr == nil && logger != nil {
		go p.logStderr(logger)
	} else {
		go p.copyStderr(stderr)
	}
	return p, nil
}

// Grace periods of a process connection.
const (
	// exitDrainGrace: once the process exited, stdout is read until it stays silent this long,
	// in case a descendant outside the process group holds it open.
	exitDrainGrace = 250 * time.Millisecond
	// exitStatusGrace: when stdout ends, how long the reader waits for the process to exit, to
	// report its status.
	exitStatusGrace = 2 * time.Second
	// stderrDrainGrace: at Close, after the process ended, how long the stderr goroutine may
	// read on before stderr is closed under it.
	stderrDrainGrace = 500 * time.Millisecond
	// stderrTailGrace: once the process exited, how long the report of its exit waits for the
	// end of its stderr, which a descendant outside the process group may hold open.
	stderrTailGrace = 250 * time.Millisecond
	// exitNoticeGrace: when a write to the server's stdin fails, how long Send waits for the
	// process's exit to be known, to report it instead of the broken pipe.
	exitNoticeGrace = time.Second
)

// stdioConn is the Conn of a Command: a stream conn over the process's stdin and stdout, and
// the process.
type stdioConn struct {
	stream *streamConn
	cmd    *exec.Cmd
	pid    int
	stdout *os.File
	stderr *os.File

	exited  chan struct{} // closed once the process was waited for
	waitErr error         // written before exited is closed

	stderrDone   chan struct{} // closed when the stderr goroutine ends
	stderrReader lineReader    // owned by the stderr goroutine
	tail         stderrTail

	exitOnce sync.Once
	exitErr  *ProcessExitError // the report of the exit, made once

	// closing is closed when Close begins; exitedBeforeClose, written before, tells whether the
	// process had exited by then, or exits because of the Close.
	closing           chan struct{}
	exitedBeforeClose bool

	closeTimeout, termTimeout time.Duration

	closeOnce sync.Once
	closeErr  error
}

// wait waits for the process (killing what is left of its group when it exits) and lets the
// stdout reader end even if a stray descendant holds stdout.
func (p *stdioConn) wait() {
	p.waitErr = waitAndKillGroup(p.cmd)
	close(p.exited)
	p.stdout.SetReadDeadline(time.Now().Add(exitDrainGrace))
}

// exitError describes the process's exit. Call it only after exited is closed. The first call
// waits, briefly, for the end of stderr: the last thing a process writes before it exits is
// often why.
func (p *stdioConn) exitError() error {
	p.exitOnce.Do(func() {
		t := time.NewTimer(stderrTailGrace)
		select {
		case <-p.stderrDone:
		case <-t.C:
		}
		t.Stop()
		p.exitErr = &ProcessExitError{Pid: p.pid, Wait: p.waitErr, Stderr: p.tail.String()}
	})
	return p.exitErr
}

func (p *stdioConn) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// streamEnded reports why stdout ended: the process's exit, as it almost always is.
func (p *stdioConn) streamEnded(readErr error) error {
	t := time.NewTimer(exitStatusGrace)
	defer t.Stop()
	select {
	case <-p.exited:
		return p.exitError()
	case <-p.stream.done:
		return nil
	case <-t.C:
		return fmt.Errorf("transport: the server process (pid %d) closed its stdout: %w", p.pid, readErr)
	}
}

// Send writes a frame to the server's stdin. Once the process has exited it is NotDelivered.
func (p *stdioConn) Send(ctx context.Context, msg *Message) error {
	if p.hasExited() {
		return &Error{Outcome: NotDelivered, ID: msg.ID, Err: p.afterExit()}
	}
	err := p.stream.Send(ctx, msg)
	if err == nil || ctx.Err() != nil || errors.Is(err, errEmptyFrame) || errors.Is(err, errFrameLineBreak) {
		return err
	}
	// The write failed on the pipe: a process that exits closes its end before its exit can be
	// known. The exit, if it comes, is what the caller needs to hear of.
	t := time.NewTimer(exitNoticeGrace)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-ctx.Done():
		return err
	case <-p.closing:
		if !p.exitedBeforeClose {
			return err
		}
	case <-t.C:
		return err
	}
	cause := p.afterExit()
	if !errors.Is(cause, ErrProcessExited) {
		return err
	}
	var te *Error
	if !errors.As(err, &te) {
		return &Error{Outcome: NotDelivered, ID: msg.ID, Err: fmt.Errorf("%w (%w)", cause, err)}
	}
	return &Error{Outcome: te.Outcome, ID: msg.ID, Err: fmt.Errorf("%w (%w)", cause, te.Err)}
}

// afterExit is why nothing can be sent once the process has exited: the exit, unless Close
// began while the process still ran, in which case the process exited because of it.
func (p *stdioConn) afterExit() error {
	select {
	case <-p.closing:
		if !p.exitedBeforeClose {
			return ErrClosed
		}
	default:
	}
	return p.exitError()
}

// OversizedFrames reports how many lines from the server were skipped for their size.
func (p *stdioConn) OversizedFrames() int64 { return p.stream.OversizedFrames() }

// Close shuts the server down; see Command. It is idempotent and safe to call concurrently;
// every call returns once the process was waited for, with the same result.
func (p *stdioConn) Close() error {
	p.closeOnce.Do(func() { p.closeErr = p.shutdown() })
	return p.closeErr
}

func (p *stdioConn) shutdown() error {
	p.exitedBeforeClose = p.hasExited()
	close(p.closing)
	// Closing stdin asks the server to exit; the reader keeps draining stdout meanwhile, so
	// that a server flushing its output does not block.
	p.stream.Close()
	var err error
	if !p.waitExit(p.closeTimeout) {
		signalGroup(p.cmd.Process, sigTerm)
		if p.waitExit(p.termTimeout) {
			err = fmt.Errorf("transport: server process %d did not exit within %v of stdin closing; terminated it (%w)",
				p.pid, p.closeTimeout, p.waitErrOrNil())
		} else {
			signalGroup(p.cmd.Process, sigKill)
			<-p.exited
			err = fmt.Errorf("transport: server process %d did not exit within %v of stdin closing nor %v after SIGTERM; killed it (%w)",
				p.pid, p.closeTimeout, p.termTimeout, p.waitErrOrNil())
		}
	}
	p.stdout.Close()
	<-p.stream.readEnd
	p.stderr.SetReadDeadline(time.Now().Add(stderrDrainGrace))
	<-p.stderrDone
	p.stderr.Close()
	return err
}

func (p *stdioConn) waitErrOrNil() error {
	if p.waitErr != nil {
		return p.waitErr
	}
	return errors.New("exit status 0")
}

// waitExit waits up to d for the process to exit and be waited for.
func (p *stdioConn) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// copyStderr reads the server's stderr into the tail and on to w, if w is set and has not
// failed, until stderr ends.
func (p *stdioConn) copyStderr(w io.Writer) {
	defer close(p.stderrDone)
	defer p.stderrReader.release()
	for {
		b, err := p.stderrReader.readSmall() // stderr is not worth a large buffer
		if len(b) > 0 {
			p.tail.Write(b)
			if w != nil {
				if _, werr := w.Write(b); werr != nil {
					w = nil // keep reading: a server blocked on a full stderr pipe would hang
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// maxStderrLine bounds one logged stderr record; a longer line is logged in pieces.
const maxStderrLine = 16 << 10

func (p *stdioConn) logStderr(l *slog.Logger) {
	defer close(p.stderrDone)
	defer p.stderrReader.release()
	log := func(b []byte) { l.Info("mcp server stderr", "pid", p.pid, "stderr", string(b)) }
	var line []byte // what came of a line that is not over yet
	for {
		chunk, err := p.stderrReader.next()
		p.tail.Write(chunk)
		line = append(line, chunk...)
		for len(line) > maxStderrLine || (len(line) == maxStderrLine && !endsLine(line)) {
			log(line[:maxStderrLine])
			line = line[maxStderrLine:]
		}
		if endsLine(line) {
			line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
			log(line)
			line = line[:0]
		} else if err != nil && len(line) > 0 {
			log(line)
		}
		if len(line) == 0 && cap(line) > idleReadSize {
			line = nil // a long line's buffer is not kept for the next
		}
		if err != nil {
			return
		}
	}
}

// stdoutReader reads the server's stdout. When the process exits, wait sets a read deadline;
// from then on a read that stays silent for exitDrainGrace ends the stream, even if a
// descendant the group kill missed keeps the pipe open. Data still comes through: a deadline
// that passed while the reader was not reading only renews the deadline.
type stdoutReader struct {
	f        *os.File
	timedOut bool
}

func (r *stdoutReader) Read(b []byte) (int, error) {
	for {
		n, err := r.f.Read(b)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			r.timedOut = false
			return n, err
		}
		if n > 0 {
			r.timedOut = false
			return n, nil
		}
		if r.timedOut {
			return 0, fmt.Errorf("stdout stayed open but silent after the process exited: %w", io.EOF)
		}
		r.timedOut = true
		r.f.SetReadDeadline(time.Now().Add(exitDrainGrace))
	}
}

// Bounds of the stderr kept for the report of a process's exit.
const (
	stderrTailBytes = 2 << 10
	stderrTailLines = 10
)

// stderrTail keeps the last stderrTailBytes bytes written to it.
type stderrTail struct {
	mu  sync.Mutex
	buf []byte
	cut bool // earlier bytes were dropped
}

func (t *stderrTail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(b)
	if t.buf == nil {
		t.buf = make([]byte, 0, stderrTailBytes)
	}
	if len(b) >= stderrTailBytes {
		t.cut = t.cut || len(t.buf) > 0 || len(b) > stderrTailBytes
		t.buf = append(t.buf[:0], b[len(b)-stderrTailBytes:]...)
		return n, nil
	}
	if over := len(t.buf) + len(b) - stderrTailBytes; over > 0 {
		t.buf = t.buf[:copy(t.buf, t.buf[over:])]
		t.cut = true
	}
	t.buf = append(t.buf, b...)
	return n, nil
}

// String returns the last stderrTailLines lines kept, without trailing line breaks, as valid
// UTF-8, and starting with "…" if anything before them was left out.
func (t *stderrTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := bytes.TrimRight(t.buf, "\r\n")
	cut := t.cut
	end := len(b)
	for range stderrTailLines {
		end = bytes.LastIndexByte(b[:end], '\n')
		if end < 0 {
			break
		}
	}
	if end >= 0 {
		b, cut = b[end+1:], true
	}
	if cut {
		// The bytes kept may begin inside a character.
		for len(b) > 0 && !utf8.RuneStart(b[0]) {
			b = b[1:]
		}
	}
	s := strings.ReplaceAll(strings.ToValidUTF8(string(b), "\uFFFD"), "\r\n", "\n")
	if cut && s != "" {
		s = "…" + s
	}
	return s
}
