package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
)

// readScript reads --transformation-file: "" is none, "-" is stdin.
func readScript(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", fmt.Errorf("--transformation-file: %w", err)
	}
	return string(b), nil
}

type tryFlags struct {
	Conn
	Endpoint    string   `flag:"endpoint" usage:"endpoint id whose filter and transformation are tried, each unless given below; its url is the one the script sees (default: https://example.com/)"`
	Filter      string   `flag:"filter" usage:"content filter in CEL to try (default: the endpoint's)"`
	Script      string   `flag:"transformation-file" usage:"file holding a transformation to try, - for stdin (default: the endpoint's)"`
	Type        string   `flag:"type" usage:"the sample event's type, e.g. invoice.paid (required)"`
	Payload     string   `flag:"payload" usage:"the sample event's payload (JSON)"`
	PayloadFile string   `flag:"payload-file" usage:"file holding the sample event's payload, - for stdin"`
	Metadata    []string `flag:"metadata" usage:"the sample event's metadata, key=value; repeat the flag or separate with commas"`
	OrderingKey string   `flag:"ordering-key" usage:"the sample event's ordering key"`
}

// repeatedFlag returns every value given to --name in args (before a
// "--"), each split at commas: the config loader keeps only the last.
func repeatedFlag(args []string, name string) []string {
	var out []string
	add := func(v string) {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		flagName, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || flagName != name {
			continue
		}
		if hasVal {
			add(val)
		} else if i+1 < len(args) {
			i++
			add(args[i])
		}
	}
	return out
}

// runEndpointTry is "hookline endpoint try": it runs a filter and a
// transformation (given, or an endpoint's) on a sample event through
// TestFilterAndTransformation and prints whether the event matches, what
// the transformation returned (the webhook as JSON), cancelled or why it
// failed, and the time each took. A failed transformation is an error
// (a non-zero exit); no match is not.
func runEndpointTry(ctx context.Context, args []string, out io.Writer, getenv func(string) string) error {
	var f tryFlags
	if _, err := parse("endpoint try", &f, args, out, getenv); err != nil {
		return err
	}
	if f.Type == "" {
		return errors.New("--type is required")
	}
	if f.Payload != "" && f.PayloadFile != "" {
		return errors.New("give --payload or --payload-file, not both")
	}
	payload := []byte(f.Payload)
	if f.PayloadFile != "" {
		var err error
		if f.PayloadFile == "-" {
			payload, err = io.ReadAll(os.Stdin)
		} else {
			payload, err = os.ReadFile(f.PayloadFile)
		}
		if err != nil {
			return fmt.Errorf("--payload-file: %w", err)
		}
	}
	md, err := metadataFlag(repeatedFlag(args, "metadata"))
	if err != nil {
		return err
	}
	script, err := readScript(f.Script)
	if err != nil {
		return err
	}
	if f.Endpoint == "" && f.Filter == "" && script == "" {
		return errors.New("nothing to try: give --filter, --transformation-file or --endpoint")
	}
	c, err := dial(f.Conn)
	if err != nil {
		return err
	}
	defer c.conn.Close()
	cctx, cancel := c.call(ctx)
	defer cancel()
	resp, err := hooklinev1.NewEndpointServiceClient(c.conn).TestFilterAndTransformation(cctx, &hooklinev1.TestFilterAndTransformationRequest{
		Filter: f.Filter, EndpointId: f.Endpoint, Transformation: script,
		EventType: f.Type, Payload: payload, Metadata: md, OrderingKey: f.OrderingKey,
	})
	if err != nil {
		return callErr(err)
	}
	return printTry(out, resp)
}

// printTry writes resp for a person: one line per part tried, then the
// transformed webhook as JSON.
func printTry(out io.Writer, resp *hooklinev1.TestFilterAndTransformationResponse) error {
	if fr := resp.GetFilter(); fr != nil {
		took := fr.GetDuration().AsDuration()
		switch {
		case fr.GetError() != "":
			fmt.Fprintf(out, "filter: no match: %s (%v)\n", fr.GetError(), took)
		case fr.GetMatched():
			fmt.Fprintf(out, "filter: match (%v)\n", took)
		default:
			fmt.Fprintf(out, "filter: no match (%v)\n", took)
		}
	}
	tr := resp.GetTransformation()
	if tr == nil {
		return nil
	}
	took := tr.GetDuration().AsDuration()
	switch {
	case tr.GetError() != "":
		fmt.Fprintf(out, "transformation: failed (%v)\n", took)
		return fmt.Errorf("%s: a delivery would end FAILED", tr.GetError())
	case tr.GetCancelled():
		fmt.Fprintf(out, "transformation: cancelled: a delivery would end CANCELLED (%v)\n", took)
		return nil
	}
	fmt.Fprintf(out, "transformation: ok (%v)\n", took)
	return printJSON(out, tr.GetWebhook())
}
