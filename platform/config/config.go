// Package config loads a service's typed configuration from flags and
// environment variables. It is the only place in Hookline that reads the
// environment.
//
// A configuration is a struct whose fields carry tags:
//
//	Brokers []string `flag:"kafka-brokers" env:"HOOKLINE_KAFKA_BROKERS" default:"127.0.0.1:9092" usage:"Kafka bootstrap brokers"`
//
// Precedence is flag, then environment, then the default. Supported
// field types are string, bool, int, int64, uint32, float64,
// time.Duration and []string (comma-separated). Nested structs are walked,
// so shared sections (Kafka connection settings) are declared once.
//
// A default is the default tag, or, for a default that is another
// package's constant (so the two cannot drift), set in code: a section
// whose pointer is a Defaulter has SetDefaults called before its fields
// are read, and a field with no default tag takes the value it then holds
// as its default (shown by -h like a tag's).
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Load registers every tagged field of cfg (a pointer to struct) on fs,
// applies defaults and environment values (looked up with getenv), then
// parses args. With -h it returns flag.ErrHelp after printing every
// setting with its environment variable and default.
func Load(fs *flag.FlagSet, cfg any, args []string, getenv func(string) string) error {
	v := reflect.ValueOf(cfg)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("config: Load needs a pointer to a struct, got %T", cfg)
	}
	var fields []field
	if err := collect(v.Elem(), &fields); err != nil {
		return err
	}
	for _, f := range fields {
		raw := f.def
		if f.env != "" {
			if e := getenv(f.env); e != "" {
				raw = e
			}
		}
		if raw != "" {
			if err := set(f.val, raw); err != nil {
				src := "default"
				if f.env != "" && getenv(f.env) != "" {
					src = "environment variable " + f.env
				}
				return fmt.Errorf("config: %s from %s: %w", f.flag, src, err)
			}
		}
		fs.Var(&flagValue{v: f.val}, f.flag, f.help())
	}
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "Usage of %s:\n", fs.Name())
		printDefaults(out, fields)
	}
	return fs.Parse(args)
}

// Defaulter is a section that sets some of its defaults in code.
type Defaulter interface {
	// SetDefaults sets the fields whose default is not a tag.
	SetDefaults()
}

type field struct {
	val            reflect.Value
	flag, env, def string
	usage          string
}

func (f field) help() string {
	var b strings.Builder
	b.WriteString(f.usage)
	if f.env != "" {
		fmt.Fprintf(&b, " (env %s)", f.env)
	}
	return b.String()
}

func printDefaults(w io.Writer, fields []field) {
	for _, f := range fields {
		fmt.Fprintf(w, "  -%s %s\n    \t%s", f.flag, typeName(f.val), f.help())
		if f.def != "" {
			fmt.Fprintf(w, " (default %q)", f.def)
		}
		fmt.Fprintln(w)
	}
}

func typeName(v reflect.Value) string {
	switch v.Interface().(type) {
	case time.Duration:
		return "duration"
	case []string:
		return "list"
	}
	return v.Kind().String()
}

func collect(v reflect.Value, out *[]field) error {
	if d, ok := v.Addr().Interface().(Defaulter); ok {
		d.SetDefaults()
	}
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		fv := v.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, ok := sf.Tag.Lookup("flag")
		if !ok {
			if sf.Type.Kind() == reflect.Struct && sf.Type != reflect.TypeFor[time.Duration]() {
				if err := collect(fv, out); err != nil {
					return err
				}
			}
			continue
		}
		if name == "" {
			return fmt.Errorf("config: field %s has an empty flag tag", sf.Name)
		}
		def, ok := sf.Tag.Lookup("default")
		if !ok && !fv.IsZero() {
			def = (&flagValue{v: fv}).String()
		}
		*out = append(*out, field{
			val:   fv,
			flag:  name,
			env:   sf.Tag.Get("env"),
			def:   def,
			usage: sf.Tag.Get("usage"),
		})
	}
	return nil
}

var errUnsupported = errors.New("unsupported field type")

func set(v reflect.Value, raw string) error {
	switch v.Interface().(type) {
	case time.Duration:
		d, err := time.ParseDuration(raw)
		if err != nil {
			return fmt.Errorf("want a duration such as 10s or 1h30m, got %q", raw)
		}
		v.SetInt(int64(d))
		return nil
	case []string:
		var items []string
		for _, s := range strings.Split(raw, ",") {
			if s = strings.TrimSpace(s); s != "" {
				items = append(items, s)
			}
		}
		v.Set(reflect.ValueOf(items))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(raw)
	case reflect.Bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", raw)
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return fmt.Errorf("want an integer, got %q", raw)
		}
		v.SetInt(n)
	case reflect.Uint32:
		n, err := strconv.ParseUint(raw, 10, 32)
		if err != nil {
			return fmt.Errorf("want a non-negative integer, got %q", raw)
		}
		v.SetUint(n)
	case reflect.Float64:
		n, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return fmt.Errorf("want a number, got %q", raw)
		}
		v.SetFloat(n)
	default:
		return fmt.Errorf("%w %s", errUnsupported, v.Type())
	}
	return nil
}

// flagValue adapts a struct field to flag.Value.
type flagValue struct{ v reflect.Value }

func (f *flagValue) String() string {
	if !f.v.IsValid() {
		return ""
	}
	if l, ok := f.v.Interface().([]string); ok {
		return strings.Join(l, ",")
	}
	return fmt.Sprint(f.v.Interface())
}

func (f *flagValue) Set(s string) error { return set(f.v, s) }

// IsBoolFlag lets boolean settings be given as a bare -flag.
func (f *flagValue) IsBoolFlag() bool { return f.v.Kind() == reflect.Bool }

// Defaults returns a T holding the values of its default tags, ignoring
// the environment: the base that tests and embedding programs adjust.
func Defaults[T any]() (T, error) {
	var v T
	err := Load(flag.NewFlagSet("defaults", flag.ContinueOnError), &v, nil, func(string) string { return "" })
	return v, err
}
