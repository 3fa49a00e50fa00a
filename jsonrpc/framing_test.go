package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
)

// readAll reads lines until an error and returns the lines (copied) and that error.
func readAll(lr *LineReader) ([]string, error) {
	var lines []string
	for {
		line, err := lr.ReadLine()
		if err != nil {
			return lines, err
		}
		lines = append(lines, string(line))
	}
}

// readerVariants wraps an input the ways a pipe or a socket may deliver it.
var readerVariants = []struct {
	name string
	wrap func(io.Reader) io.Reader
}{
	{"plain", func(r io.Reader) io.Reader { return r }},
	{"one byte", iotest.OneByteReader},
	{"half", iotest.HalfReader},
	{"data with EOF", iotest.DataErrReader},
}

func TestLineReaderLines(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"empty input", "", nil},
		{"LF", "a\nbb\n", []string{"a", "bb"}},
		{"CRLF", "a\r\nbb\r\n", []string{"a", "bb"}},
		{"mixed terminators", "a\r\nb\nc\r\n", []string{"a", "b", "c"}},
		{"blank lines skipped", "\n\n \t\r\n\r\na\n\n\n  \nb\n\n", []string{"a", "b"}},
		{"only blank lines", "\n\r\n \n", nil},
		{"final unterminated line", "a\nb", []string{"a", "b"}},
		{"final unterminated CR line", "a\nb\r", []string{"a", "b"}},
		{"interior CR kept", "a\rb\n", []string{"a\rb"}},
		{"surrounding spaces kept", "  {} \n", []string{"  {} "}},
	}
	for _, tc := range tests {
		for _, v := range readerVariants {
			t.Run(tc.name+"/"+v.name, func(t *testing.T) {
				lr := NewLineReader(v.wrap(strings.NewReader(tc.in)), 0)
				got, err := readAll(lr)
				if !errors.Is(err, io.EOF) {
					t.Fatalf("final error = %v, want io.EOF", err)
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.want) || len(got) != len(tc.want) {
					t.Errorf("lines = %q, want %q", got, tc.want)
				}
				if _, err := lr.ReadLine(); !errors.Is(err, io.EOF) {
					t.Errorf("ReadLine after EOF = %v, want io.EOF", err)
				}
			})
		}
	}
}

func TestNewLineReaderDefaultLimit(t *testing.T) {
	for _, max := range []int{0, -1} {
		if got := NewLineReader(strings.NewReader(""), max).max; got != DefaultMaxMessageSize {
			t.Errorf("NewLineReader(_, %d).max = %d, want %d", max, got, DefaultMaxMessageSize)
		}
	}
}

// linePattern repeats in bigLine. Its length is prime, so no buffer size is a multiple of
// it and a dropped or repeated buffer-sized chunk shows up as a mismatch.
var linePattern = func() []byte {
	var b []byte
	for i := 0; len(b) < 4093; i++ {
		b = strconv.AppendInt(b, int64(i), 36)
		b = append(b, ' ')
	}
	return b[:4093]
}()

// bigLine returns a line of exactly n bytes with no newline.
func bigLine(n int) []byte {
	return bytes.Repeat(linePattern, n/len(linePattern)+1)[:n]
}

func TestLineReaderHugeLine(t *testing.T) {
	const size = 16 << 20
	prefix := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"blob":"`
	suffix := `"}}`
	line := append([]byte(prefix), bigLine(size-len(prefix)-len(suffix))...)
	line = append(line, suffix...)
	if len(line) != size {
		t.Fatalf("built %d bytes, want %d", len(line), size)
	}
	in := make([]byte, 0, size+64)
	in = append(in, line...)
	in = append(in, "\n"...)
	in = append(in, `{"jsonrpc":"2.0","id":2,"method":"ping"}`+"\n"...)

	lr := NewLineReader(bytes.NewReader(in), size+1)
	got, err := lr.ReadLine()
	if err != nil {
		t.Fatalf("ReadLine: %v", err)
	}
	if !bytes.Equal(got, line) {
		t.Fatalf("the 16 MB line came back changed (%d bytes, want %d)", len(got), len(line))
	}
	m, err := lr.Read()
	if err != nil {
		t.Fatalf("Read after the huge line: %v", err)
	}
	if m.Method != "ping" || m.ID.Raw() != "2" {
		t.Errorf("next message = %s", m)
	}
	if _, err := lr.Read(); !errors.Is(err, io.EOF) {
		t.Errorf("final Read = %v, want io.EOF", err)
	}

	// The same line decodes as a message.
	lr = NewLineReader(bytes.NewReader(in), size)
	m, err = lr.Read()
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if len(m.Params) != size-len(prefix)-len(suffix)+len(`{"blob":""}`) {
		t.Errorf("params are %d bytes", len(m.Params))
	}
}

func TestLineReaderReleasesBigBuffer(t *testing.T) {
	big := bigLine(4 << 20)
	in := append(append(big, '\n'), "small\n"...)
	lr := NewLineReader(bytes.NewReader(in), 0)
	if line, err := lr.ReadLine(); err != nil || len(line) != len(big) {
		t.Fatalf("ReadLine = %d bytes, %v", len(line), err)
	}
	if line, err := lr.ReadLine(); err != nil || string(line) != "small" {
		t.Fatalf("ReadLine = %q, %v", line, err)
	}
	if c := cap(lr.buf); c > 1<<20 {
		t.Errorf("after a small line the reader still holds a %d-byte buffer", c)
	}
}

func TestLineReaderTooLarge(t *testing.T) {
	tests := []struct {
		name        string
		limit, size int
		terminated  bool
	}{
		{"small limit, line within the read buffer", 1024, 2000, true},
		{"small limit, one byte over", 1024, 1025, true},
		{"small limit, unterminated at EOF", 1024, 1025, false},
		{"line spans buffers, limit between", 100 << 10, 300 << 10, true},
		{"line spans buffers, one byte over", 100 << 10, 100<<10 + 1, true},
		{"one byte over the read buffer", 64<<10 - 1, 64 << 10, true},
		{"limit equals the read buffer, one byte over", 64 << 10, 64<<10 + 1, true},
		{"large, unterminated at EOF", 100 << 10, 300 << 10, false},
		{"megabytes over a small limit", 2048, 2 << 20, true},
	}
	for _, tc := range tests {
		for _, v := range readerVariants {
			t.Run(tc.name+"/"+v.name, func(t *testing.T) {
				big := bigLine(tc.size)
				in := []byte(`{"jsonrpc":"2.0","id":1,"method":"first"}` + "\n")
				in = append(in, big...)
				if tc.terminated {
					in = append(in, "\n"+`{"jsonrpc":"2.0","id":3,"method":"next"}`+"\n"...)
				}
				lr := NewLineReader(v.wrap(bytes.NewReader(in)), tc.limit)

				if m, err := lr.Read(); err != nil || m.Method != "first" {
					t.Fatalf("first Read = %v, %v", m, err)
				}
				_, err := lr.ReadLine()
				if !errors.Is(err, ErrMessageTooLarge) {
					t.Fatalf("ReadLine of %d bytes over a limit of %d = %v, want ErrMessageTooLarge", tc.size, tc.limit, err)
				}
				var tl *TooLargeError
				if !errors.As(err, &tl) {
					t.Fatalf("error %T is not a *TooLargeError", err)
				}
				if tl.Size != tc.size || tl.Limit != tc.limit {
					t.Errorf("Size, Limit = %d, %d; want %d, %d", tl.Size, tl.Limit, tc.size, tc.limit)
				}
				wantHead := big[:min(len(big), headSize)]
				if !bytes.Equal(tl.Head, wantHead) {
					t.Errorf("Head = %.40q… (%d bytes), want %.40q… (%d bytes)", tl.Head, len(tl.Head), wantHead, len(wantHead))
				}
				if !strings.Contains(tl.Error(), strconv.Itoa(tc.limit)) {
					t.Errorf("Error() = %q does not name the limit", tl.Error())
				}
				if tc.terminated {
					m, err := lr.Read()
					if err != nil || m.Method != "next" {
						t.Fatalf("Read after the oversized line = %v, %v", m, err)
					}
				}
				if _, err := lr.ReadLine(); !errors.Is(err, io.EOF) {
					t.Errorf("final ReadLine = %v, want io.EOF", err)
				}
			})
		}
	}
}

func TestLineReaderHeadIsCopied(t *testing.T) {
	in := append(bigLine(300<<10), "\nnext\n"...)
	lr := NewLineReader(bytes.NewReader(in), 100<<10)
	_, err := lr.ReadLine()
	var tl *TooLargeError
	if !errors.As(err, &tl) {
		t.Fatalf("ReadLine = %v, want a *TooLargeError", err)
	}
	head := append([]byte(nil), tl.Head...)
	if line, err := lr.ReadLine(); err != nil || string(line) != "next" {
		t.Fatalf("ReadLine = %q, %v", line, err)
	}
	if !bytes.Equal(tl.Head, head) {
		t.Errorf("Head changed after the next read")
	}
}

func TestLineReaderLimitExact(t *testing.T) {
	for _, limit := range []int{1024, 64<<10 - 1, 64 << 10, 64<<10 + 1, 200 << 10} {
		for _, term := range []string{"\n", ""} {
			t.Run(fmt.Sprintf("%d/%q", limit, term), func(t *testing.T) {
				line := bigLine(limit)
				in := append(append([]byte(nil), line...), term...)
				lr := NewLineReader(bytes.NewReader(in), limit)
				got, err := lr.ReadLine()
				if err != nil {
					t.Fatalf("ReadLine of exactly the limit: %v", err)
				}
				if !bytes.Equal(got, line) {
					t.Errorf("line changed: %d bytes, want %d", len(got), len(line))
				}
				if _, err := lr.ReadLine(); !errors.Is(err, io.EOF) {
					t.Errorf("final ReadLine = %v, want io.EOF", err)
				}
			})
		}
	}
}

func TestLineReaderReadDecodeError(t *testing.T) {
	in := "not json\n" + `{"jsonrpc":"1.0","id":5,"method":"m"}` + "\n" + `{"jsonrpc":"2.0","id":6,"method":"m"}` + "\n"
	lr := NewLineReader(strings.NewReader(in), 0)

	m, err := lr.Read()
	var se *json.SyntaxError
	if !errors.As(err, &se) || m != nil {
		t.Errorf("Read of bad JSON = %v, %v; want nil, a *json.SyntaxError", m, err)
	}
	m, err = lr.Read()
	if !errors.Is(err, ErrInvalidMessage) || m == nil || m.ID.Raw() != "5" {
		t.Errorf("Read of a bad message = %v, %v; want id 5 and ErrInvalidMessage", m, err)
	}
	m, err = lr.Read()
	if err != nil || m.ID.Raw() != "6" {
		t.Errorf("Read = %v, %v; want id 6", m, err)
	}
	if _, err := lr.Read(); !errors.Is(err, io.EOF) {
		t.Errorf("final Read = %v, want io.EOF", err)
	}
}

func TestLineReaderIOError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("ok\npartial"), iotest.ErrReader(boom))
	lr := NewLineReader(r, 0)
	if line, err := lr.ReadLine(); err != nil || string(line) != "ok" {
		t.Fatalf("ReadLine = %q, %v", line, err)
	}
	if _, err := lr.ReadLine(); !errors.Is(err, boom) {
		t.Errorf("ReadLine = %v, want %v", err, boom)
	}

	// An I/O error while skipping an oversized line is reported as such.
	r = io.MultiReader(bytes.NewReader(bigLine(200<<10)), iotest.ErrReader(boom))
	lr = NewLineReader(r, 100<<10)
	if _, err := lr.ReadLine(); !errors.Is(err, boom) {
		t.Errorf("ReadLine = %v, want %v", err, boom)
	}
}

// scriptedReader returns its chunks one per Read; a nil chunk returns errPause instead
// (a read deadline), after which later Reads go on with the next chunk.
type scriptedReader struct{ chunks [][]byte }

var errPause = errors.New("deadline")

func (r *scriptedReader) Read(p []byte) (int, error) {
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	c := r.chunks[0]
	if c == nil {
		r.chunks = r.chunks[1:]
		return 0, errPause
	}
	n := copy(p, c)
	if n == len(c) {
		r.chunks = r.chunks[1:]
	} else {
		r.chunks[0] = c[n:]
	}
	return n, nil
}

// TestLineReaderErrorMidLine: an error that interrupts a line (a read deadline) is
// returned, and the next ReadLine completes the line with nothing lost, whether the
// line's start was in the buffer or had overflowed it, and however often it happens.
func TestLineReaderErrorMidLine(t *testing.T) {
	long := strings.Repeat("x", 100<<10)
	r := &scriptedReader{chunks: [][]byte{
		[]byte("one\n{\"a\":"), nil, nil, []byte("1}\ntw"), nil, []byte("o\n" + long[:70<<10]), nil, []byte(long[70<<10:] + "\nend"),
	}}
	lr := NewLineReader(r, 1<<20)
	var got []string
	pauses := 0
	for {
		line, err := lr.ReadLine()
		if errors.Is(err, errPause) {
			pauses++
			continue
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		got = append(got, string(line))
	}
	want := []string{"one", `{"a":1}`, "two", long, "end"}
	if pauses != 4 || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("%d pauses, lines %.80q; want 4 and %.80q", pauses, got, want)
	}
}

// lineRecorder checks that every Write call carries exactly one whole line.
type lineRecorder struct {
	mu    sync.Mutex // guards the fields below
	calls int
	bad   []string
}

func (r *lineRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	// Writes coalesce, but each must hold whole lines only.
	if len(p) == 0 || p[len(p)-1] != '\n' {
		r.bad = append(r.bad, fmt.Sprintf("%.60q", p))
	}
	return len(p), nil
}

func TestLineWriterConcurrent(t *testing.T) {
	const writers, perWriter = 50, 20
	pr, pw := io.Pipe()
	rec := &lineRecorder{}
	lw := NewLineWriter(io.MultiWriter(rec, pw))

	type result struct {
		seen map[string]int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		seen := map[string]int{}
		lr := NewLineReader(pr, 0)
		for {
			m, err := lr.Read()
			if errors.Is(err, io.EOF) {
				done <- result{seen: seen}
				return
			}
			if err != nil {
				done <- result{err: err}
				pr.CloseWithError(err) // unblock the writers
				return
			}
			seen[m.ID.Raw()]++
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, writers*perWriter)
	for g := range writers {
		wg.Go(func() {
			for i := range perWriter {
				id := IntID(int64(g*1000 + i))
				// Sizes vary from a few bytes to well past the reader's 64 KiB buffer, and
				// some params are pretty-printed, so encodings differ in length and path.
				n := (g*perWriter + i) * 97 % (16 << 10)
				if i == perWriter-1 {
					n = 150<<10 + g
				}
				payload := strings.Repeat("x", n)
				params := json.RawMessage(`{"g":` + strconv.Itoa(g) + `,"p":"` + payload + `"}`)
				if i%3 == 0 {
					params = json.RawMessage("{\n  \"g\": " + strconv.Itoa(g) + ",\n  \"p\": \"" + payload + "\"\n}")
				}
				var err error
				if g%2 == 0 {
					err = lw.Write(NewRequest(id, "tools/call", params))
				} else {
					var b []byte
					if b, err = NewResult(id, params).Encode(); err == nil {
						err = lw.WriteRaw(b)
					}
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("write: %v", err)
	}
	pw.Close()
	res := <-done
	if res.err != nil {
		t.Fatalf("reading the interleaved stream: %v", res.err)
	}
	if len(res.seen) != writers*perWriter {
		t.Errorf("read %d distinct ids, want %d", len(res.seen), writers*perWriter)
	}
	for id, n := range res.seen {
		if n != 1 {
			t.Errorf("id %s read %d times", id, n)
		}
	}
	if rec.calls == 0 || rec.calls > writers*perWriter {
		t.Errorf("%d Write calls for %d messages", rec.calls, writers*perWriter)
	}
	t.Logf("%d messages left in %d write calls", writers*perWriter, rec.calls)
	for _, b := range rec.bad {
		t.Errorf("a Write call did not end at a line boundary: %s", b)
	}
}

// chunkCopier keeps copies of what it is given, so aliasing would show.
type chunkCopier struct{ chunks []string }

func (c *chunkCopier) Write(p []byte) (int, error) {
	c.chunks = append(c.chunks, string(p))
	return len(p), nil
}

func TestLineWriterWriteRaw(t *testing.T) {
	var out chunkCopier
	lw := NewLineWriter(&out)
	line := []byte(`{"jsonrpc":"2.0","method":"a<b>"}`)
	if err := lw.WriteRaw(line); err != nil {
		t.Fatal(err)
	}
	copy(line, "XXXXXXXX") // the writer must not keep the caller's slice
	if err := lw.WriteRaw([]byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := lw.Write(NewNotification("n", json.RawMessage(`{"x":"<&>"}`))); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"jsonrpc":"2.0","method":"a<b>"}` + "\n",
		"{}\n",
		`{"jsonrpc":"2.0","method":"n","params":{"x":"<&>"}}` + "\n",
	}
	if fmt.Sprintf("%q", out.chunks) != fmt.Sprintf("%q", want) {
		t.Errorf("writes =\n  %q\nwant\n  %q", out.chunks, want)
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

func TestLineWriterErrors(t *testing.T) {
	boom := errors.New("boom")
	lw := NewLineWriter(failingWriter{boom})
	if err := lw.Write(NewNotification("n", nil)); !errors.Is(err, boom) {
		t.Errorf("Write = %v, want %v", err, boom)
	}
	if err := lw.WriteRaw([]byte("{}")); !errors.Is(err, boom) {
		t.Errorf("WriteRaw = %v, want %v", err, boom)
	}

	var out chunkCopier
	lw = NewLineWriter(&out)
	if err := lw.Write(NewRequest(IntID(1), "m", json.RawMessage("{\n\"a\":"))); err == nil {
		t.Errorf("Write of unencodable params succeeded")
	}
	if len(out.chunks) != 0 {
		t.Errorf("a failed encoding wrote %q", out.chunks)
	}
}

func TestLineWriterDropsBigBuffer(t *testing.T) {
	var out chunkCopier
	lw := NewLineWriter(&out)
	big := json.RawMessage(`{"p":"` + strings.Repeat("x", 2<<20) + `"}`)
	if err := lw.Write(NewResult(IntID(1), big)); err != nil {
		t.Fatal(err)
	}
	if cap(lw.buf) > 1<<20 {
		t.Errorf("Write kept a %d-byte buffer", cap(lw.buf))
	}
	if err := lw.WriteRaw(append(big, big...)); err != nil {
		t.Fatal(err)
	}
	if cap(lw.buf) > 1<<20 {
		t.Errorf("WriteRaw kept a %d-byte buffer", cap(lw.buf))
	}
	if err := lw.WriteRaw([]byte("{}")); err != nil {
		t.Fatal(err)
	}
	if got := out.chunks[len(out.chunks)-1]; got != "{}\n" {
		t.Errorf("last write = %q", got)
	}
}

func TestLineWriterCork(t *testing.T) {
	rec := &lineRecorder{}
	lw := NewLineWriter(rec)
	lw.Cork()
	for i := 0; i < 10; i++ {
		if err := lw.Write(NewNotification("n", nil)); err != nil {
			t.Fatal(err)
		}
	}
	if rec.calls != 0 {
		t.Fatalf("corked writer wrote %d times", rec.calls)
	}
	if err := lw.Uncork(); err != nil {
		t.Fatal(err)
	}
	if rec.calls != 1 || len(rec.bad) != 0 {
		t.Fatalf("uncork: %d calls, bad %v", rec.calls, rec.bad)
	}
	if err := lw.Write(NewNotification("n", nil)); err != nil || rec.calls != 2 {
		t.Fatalf("uncorked write: %v, %d calls", err, rec.calls)
	}
}
