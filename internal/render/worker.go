package render

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"os"
	"runtime/debug"
	"strconv"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
)

// wireVersion changes whenever the request or response format does; a
// worker is always the controller's own binary, so it only guards against
// a mix-up.
const wireVersion = 1

// Response kinds.
const (
	respOK byte = iota
	respTemplateError
	respError
)

// ServeWorkerIfAsked turns this process into a render worker when a
// Sandbox started it, and then never returns: it serves renders on stdin
// and stdout until stdin closes. Otherwise it returns at once. Call it
// first in main, and in the TestMain of a package whose tests use a
// Sandbox, before anything else starts.
func ServeWorkerIfAsked() {
	v, ok := os.LookupEnv(workerEnv)
	if !ok {
		return
	}
	memory, err := strconv.ParseInt(v, 10, 64)
	if err != nil || memory <= 0 {
		fmt.Fprintf(os.Stderr, "%s=%q is not a memory bound in bytes\n", workerEnv, v)
		os.Exit(2)
	}
	os.Exit(serveWorker(memory, os.Stdin, os.Stdout))
}

// serveWorker bounds this process's memory and serves requests.
func serveWorker(memory int64, in io.Reader, out io.Writer) int {
	// NOTE: Helm's values merge logs type conflicts with the values in them.
	stdlog.SetOutput(io.Discard)
	// The soft limit makes the collector work hard before the hard bound
	// refuses memory, so a render that fits is not killed for garbage.
	debug.SetMemoryLimit(memory * 3 / 4)
	// Under that limit, a worker's heap is one render's garbage: collecting
	// it seldom is faster, as for the render command.
	debug.SetGCPercent(400)
	if err := limitMemory(memory); err != nil {
		fmt.Fprintf(os.Stderr, "render worker: bound the memory: %v\n", err)
		return 2
	}
	r := bufio.NewReader(in)
	for {
		req, err := readFrame(r, 1<<40)
		if errors.Is(err, io.EOF) {
			return 0
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "render worker: read a request: %v\n", err)
			return 2
		}
		if err := writeFrame(out, serveOne(req)); err != nil {
			fmt.Fprintf(os.Stderr, "render worker: write a response: %v\n", err)
			return 2
		}
	}
}

// serveOne renders one request and encodes the outcome.
func serveOne(req []byte) []byte {
	ch, values, opts, err := decodeRequest(req)
	if err != nil {
		return encodeResponse(nil, err)
	}
	out, err := executeTemplates(context.Background(), ch, values, opts)
	return encodeResponse(out, err)
}

func encodeRequest(ch *chartv2.Chart, values map[string]any, opts Options) ([]byte, error) {
	w := &wireWriter{}
	w.uvarint(wireVersion)
	if err := w.chart(ch, 0); err != nil {
		return nil, err
	}
	if err := w.table(values, 0); err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	w.string(opts.ReleaseName)
	w.string(opts.Namespace)
	w.bool(opts.Upgrade)
	if err := w.json(opts.Capabilities); err != nil {
		return nil, err
	}
	return w.buf, nil
}

func decodeRequest(data []byte) (*chartv2.Chart, map[string]any, Options, error) {
	var opts Options
	r := &wireReader{buf: data}
	v, err := r.uvarint()
	if err != nil {
		return nil, nil, opts, err
	}
	if v != wireVersion {
		return nil, nil, opts, fmt.Errorf("render worker: request version %d, and this worker reads %d", v, wireVersion)
	}
	ch, err := r.chart(0)
	if err != nil {
		return nil, nil, opts, err
	}
	values, err := r.table(0)
	if err != nil {
		return nil, nil, opts, err
	}
	if values == nil {
		values = map[string]any{}
	}
	if opts.ReleaseName, err = r.string(); err != nil {
		return nil, nil, opts, err
	}
	if opts.Namespace, err = r.string(); err != nil {
		return nil, nil, opts, err
	}
	if opts.Upgrade, err = r.bool(); err != nil {
		return nil, nil, opts, err
	}
	if err := r.json(&opts.Capabilities); err != nil {
		return nil, nil, opts, err
	}
	return ch, values, opts, nil
}

// encodeResponse writes the output, or the error: a TemplateError field by
// field, any other as its message, which executeTemplates builds from the
// chart's names and Helm's dependency and merge errors, never from output.
func encodeResponse(out *templateOutput, err error) []byte {
	w := &wireWriter{}
	var te *TemplateError
	switch {
	case errors.As(err, &te):
		w.buf = append(w.buf, respTemplateError)
		w.string(te.Stage)
		w.string(te.Template)
		w.uvarint(uint64(te.Line))
		w.uvarint(uint64(te.Column))
		w.uvarint(uint64(te.Document))
		// NOTE: the chart's message goes to the parent unmasked, over the
		// worker's own pipe; helm masks or drops it there.
		w.string(te.Message)
	case err != nil:
		w.buf = append(w.buf, respError)
		w.string(err.Error())
	default:
		w.buf = append(w.buf, respOK)
		w.uvarint(uint64(len(out.Files)))
		for name, content := range out.Files {
			w.string(name)
			w.string(content)
		}
		w.files(out.CRDs)
	}
	return w.buf
}

func decodeResponse(data []byte) (*templateOutput, error) {
	r := &wireReader{buf: data}
	kind, err := r.byte()
	if err != nil {
		return nil, err
	}
	switch kind {
	case respTemplateError:
		te := &TemplateError{}
		if te.Stage, err = r.string(); err != nil {
			return nil, err
		}
		if te.Template, err = r.string(); err != nil {
			return nil, err
		}
		var n [3]uint64
		for i := range n {
			if n[i], err = r.uvarint(); err != nil {
				return nil, err
			}
		}
		te.Line, te.Column, te.Document = int(n[0]), int(n[1]), int(n[2])
		if te.Message, err = r.string(); err != nil {
			return nil, err
		}
		return nil, te
	case respError:
		msg, err := r.string()
		if err != nil {
			return nil, err
		}
		return nil, errors.New(msg)
	case respOK:
		count, err := r.count()
		if err != nil {
			return nil, err
		}
		out := &templateOutput{Files: make(map[string]string, prealloc(count))}
		for range count {
			name, err := r.string()
			if err != nil {
				return nil, err
			}
			if out.Files[name], err = r.string(); err != nil {
				return nil, err
			}
		}
		if out.CRDs, err = r.files(); err != nil {
			return nil, err
		}
		return out, nil
	}
	return nil, fmt.Errorf("render worker: unknown response kind %d", kind)
}
