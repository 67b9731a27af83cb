// Command hookline is Hookline's admin and developer tool: manage
// endpoints, publish events, tail delivery results, and run all of
// Hookline on an embedded Kafka with `hookline dev`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `hookline — webhook delivery platform tool

Usage:
  hookline dev [flags]                      run ingest and dispatcher on an embedded Kafka
  hookline endpoint create --url URL [flags] create an endpoint (prints it with its secret)
  hookline endpoint update ID [flags]       change the fields given as flags
                        create and update: [--header K=V]... [--header-secret K=V]... (repeatable)
                        [--auth none|basic|bearer|oauth2 --auth-…/--oauth2-…] [--client-cert-file F --client-key-file F]
                                            what the receiver gets besides the signature (-h lists the flags)
  hookline endpoint get ID                  show an endpoint
  hookline endpoint list                    list endpoints
  hookline endpoint pause ID [--reason R]   hold deliveries without burning attempts
  hookline endpoint resume ID               deliver again
  hookline endpoint delete ID               delete an endpoint
  hookline endpoint rotate-secret ID        rotate the signing secret
  hookline endpoint test ID                 send a signed test event now, print the outcome
  hookline endpoint try --type T [--endpoint ID] [--filter F] [--transformation-file PATH]
                        [--payload JSON | --payload-file PATH] [--metadata k=v]... [--ordering-key K]
                                            run a filter and a transformation on a sample event
  hookline publish --type T --data JSON     publish an event
  hookline publish ... --idempotency-key K  publish at most once per key (24 h)
  hookline results tail [flags]             print delivery results as JSON lines
  hookline apikey new --tenant T [--scope S] make an API key (scope publish, read or admin)
                                            and the hashed entry that admits it
  hookline secrets new-key                  print a new --secrets-key-file line
  hookline secrets rekey --secrets-key-file F
                                            reseal every endpoint secret under F's first key
  hookline deliveries get ID                a delivery with every attempt
  hookline deliveries list [--event ID] [--endpoint ID] [--state S] [--type T]
                          [--since T] [--until T] [--limit N] [--page-token P]
                                            list deliveries, oldest first
  hookline events get ID                    an event with its payload and deliveries
  hookline events list [--type T] [--since T] [--until T] [--limit N] [--page-token P]
                                            list events, oldest first
  hookline resend ID                        one more attempt of a delivery, now
  hookline recover EP_ID --since T          redeliver an endpoint's failed deliveries since T
  hookline lanes blocked --endpoint ID      list an ordered endpoint's blocked lanes
  hookline lanes skip --endpoint ID --ordering-key K --delivery D
                                            dead-letter a blocked lane's head, release the lane
  hookline lanes resend --endpoint ID --ordering-key K --delivery D
                                            attempt a blocked lane's head again (fresh budget)

Client commands reach ingest at --addr (HOOKLINE_ADDR, default 127.0.0.1:7070)
with --api-key (HOOKLINE_API_KEY); over TLS with --ca (or --tls for the system
roots), presenting a client certificate with --cert and --key.
Run "hookline <command> -h" for its flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Getenv)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "hookline:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		fmt.Fprint(out, usage)
		return errors.New("no command given")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "dev":
		return runDev(ctx, rest, out, getenv)
	case "endpoint", "endpoints":
		return runEndpoint(ctx, rest, out, getenv)
	case "publish":
		return runPublish(ctx, rest, out, getenv)
	case "deliveries", "delivery":
		return runDeliveries(ctx, rest, out, getenv)
	case "events", "event":
		return runEvents(ctx, rest, out, getenv)
	case "resend":
		return runResend(ctx, rest, out, getenv)
	case "recover":
		return runRecover(ctx, rest, out, getenv)
	case "lanes", "lane":
		return runLanes(ctx, rest, out, getenv)
	case "secrets":
		return runSecrets(ctx, rest, out, getenv)
	case "apikey", "apikeys":
		return runAPIKey(rest, out, getenv)
	case "results":
		if len(rest) == 0 || rest[0] != "tail" {
			return errors.New("usage: hookline results tail [flags]")
		}
		return runResultsTail(ctx, rest[1:], out, getenv)
	case "help", "-h", "--help":
		fmt.Fprint(out, usage)
		return nil
	}
	fmt.Fprint(out, usage)
	return fmt.Errorf("unknown command %q", cmd)
}
