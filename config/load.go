package config

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// EnvPrefix starts the name of every environment variable that sets a key.
const EnvPrefix = "PHASECRAWL_"

// stringList is a repeatable string flag.
type stringList struct{ dst *[]string }

func (s stringList) String() string {
	if s.dst == nil {
		return ""
	}
	return strings.Join(*s.dst, ",")
}
func (s stringList) Set(v string) error { *s.dst = append(*s.dst, v); return nil }

// commaList is a repeatable flag whose values may also be comma-separated lists.
type commaList struct{ dst *[]string }

func (s commaList) String() string {
	if s.dst == nil {
		return ""
	}
	return strings.Join(*s.dst, ",")
}
func (s commaList) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*s.dst = append(*s.dst, p)
		}
	}
	return nil
}

// Load builds a node's configuration from its defaults, the YAML file named by
// --config, the flags in args and the environment (looked up with lookupEnv,
// usually os.LookupEnv), in that order of precedence (later wins). It returns
// flag.ErrHelp when args ask for help, after printing the usage to out.
func Load(args []string, lookupEnv func(string) (string, bool), out io.Writer) (Config, error) {
	return load(args, lookupEnv, out, os.ReadFile, LoadOptions{})
}

// LoadOptions let a command other than run reuse run's flags and sources
// (LoadWith).
type LoadOptions struct {
	// Command names the flag set (default "run").
	Command string
	// Defaults, if set, changes the defaults before the file and flags.
	Defaults func(*Config)
	// Flags, if set, defines the command's own flags beside the node's.
	Flags func(*flag.FlagSet)
	// Args, if set, receives the arguments that are not flags (they may
	// come between flags); nil: any such argument is an error.
	Args *[]string
	// Finish, if set, runs after the environment and before Validate.
	Finish func(*Config) error
}

// LoadWith is Load for a command that takes the node's flags and more
// (opts): phasecrawl crawl.
func LoadWith(args []string, lookupEnv func(string) (string, bool), out io.Writer, opts LoadOptions) (Config, error) {
	return load(args, lookupEnv, out, os.ReadFile, opts)
}

// load is LoadWith with the file reader replaced (fuzzing).
func load(args []string, lookupEnv func(string) (string, bool), out io.Writer, readFile func(string) ([]byte, error), opts LoadOptions) (Config, error) {
	cfg := Default()
	if opts.Defaults != nil {
		opts.Defaults(&cfg)
	}
	if path := configPath(args); path != "" {
		data, err := readFile(path)
		if err != nil {
			return cfg, fmt.Errorf("config: read %s: %w", path, err)
		}
		if err := decodeYAML(path, data, &cfg); err != nil {
			return cfg, err
		}
	}
	name := opts.Command
	if name == "" {
		name = "run"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	BindFlags(fs, &cfg)
	if opts.Flags != nil {
		opts.Flags(fs)
	}
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			return cfg, err
		}
		if fs.NArg() == 0 {
			break
		}
		if opts.Args == nil {
			return cfg, fmt.Errorf("config: unexpected argument %q (flags start with --)", fs.Arg(0))
		}
		if len(rest) > fs.NArg() && rest[len(rest)-fs.NArg()-1] == "--" {
			*opts.Args = append(*opts.Args, fs.Args()...) // after --: no more flags
			break
		}
		*opts.Args = append(*opts.Args, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if err := ApplyEnv(&cfg, lookupEnv); err != nil {
		return cfg, err
	}
	if opts.Finish != nil {
		if err := opts.Finish(&cfg); err != nil {
			return cfg, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// BindFlags defines the node's command-line flags on fs, writing into cfg.
// Repeatable flags (--seed, --resolve, --allow-domain) add to what the file set.
func BindFlags(fs *flag.FlagSet, cfg *Config) {
	fs.String("config", "", "YAML configuration file (flags override it, PHASECRAWL_* variables override flags)")
	fs.StringVar(&cfg.Name, "name", cfg.Name, "node name (default: the hostname)")
	fs.StringVar(&cfg.Data, "data", cfg.Data, "data directory (frontier, WARC files, crawl log)")
	fs.StringVar(&cfg.HTTP, "http", cfg.HTTP, "API listen address")
	fs.StringVar(&cfg.APITokenFile, "api-token-file", cfg.APITokenFile, "file with the API bearer token (required when --http is not loopback)")
	fs.Var(stringList{&cfg.Seeds}, "seed", "seed URL (repeatable)")
	fs.StringVar(&cfg.SeedsFile, "seeds", cfg.SeedsFile, "file with one seed URL a line")
	fs.Var(stringList{&cfg.Resolve}, "resolve", "'PATTERN=HOST:PORT': dial hosts matching the glob at HOST:PORT (repeatable)")
	fs.BoolVar(&cfg.AllowPrivate, "allow-private", cfg.AllowPrivate, "allow connections to loopback and private addresses (--resolve targets need it not)")
	fs.BoolVar(&cfg.Fetch.AllowLinkLocal, "allow-link-local", cfg.Fetch.AllowLinkLocal, "allow connections to link-local addresses and cloud metadata endpoints (169.254.169.254)")
	fs.DurationVar(&cfg.Delay, "delay", cfg.Delay, "minimum pause between two requests to one host")
	fs.DurationVar(&cfg.Recrawl.Interval, "revisit", cfg.Recrawl.Interval, "fetch every page again this long after its last fetch (0: crawl once)")
	fs.StringVar(&cfg.UserAgent, "user-agent", cfg.UserAgent, "User-Agent header and robots.txt agent")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "fetch workers (hosts served at once)")
	fs.Var(stringList{&cfg.Scope.AllowDomains}, "allow-domain", "domain whose hosts may be crawled (repeatable; default: the seeds' hosts)")
	fs.IntVar(&cfg.Scope.MaxDepth, "max-depth", cfg.Scope.MaxDepth, "largest link distance from a seed (0 = unlimited)")
	fs.Var(stringList{&cfg.Scope.PrivateSuffixes}, "private-suffix", "suffix added to the Public Suffix List: its subdomains are registered domains (repeatable)")
	fs.IntVar(&cfg.Scope.MaxHostsPerDomain, "max-hosts-per-domain", cfg.Scope.MaxHostsPerDomain, "host names admitted per registered domain, seed hosts and allowed hosts aside (0 = unlimited)")
	fs.StringVar(&cfg.Politeness.Key, "politeness-key", cfg.Politeness.Key, "politeness unit: host, or domain (every name of a registered domain is one unit)")
	fs.Float64Var(&cfg.Politeness.DelayFactor, "delay-factor", cfg.Politeness.DelayFactor, "the next request to a unit waits at least this many times the last response time (0 = off)")
	fs.IntVar(&cfg.Scope.MaxPagesPerHost, "max-pages-per-host", cfg.Scope.MaxPagesPerHost, "URLs admitted per host (0 = unlimited)")
	fs.IntVar(&cfg.Scope.MaxSegmentRepeats, "max-segment-repeats", cfg.Scope.MaxSegmentRepeats, "times a path segment sequence may repeat in a row (0 = off)")
	fs.IntVar(&cfg.Scope.MaxPathDepth, "max-path-depth", cfg.Scope.MaxPathDepth, "path segments of a URL (0 = off)")
	fs.IntVar(&cfg.Scope.MaxQueryParams, "max-query-params", cfg.Scope.MaxQueryParams, "query parameters of a URL (0 = off)")
	fs.IntVar(&cfg.Scope.MaxPatternDepth, "max-pattern-depth", cfg.Scope.MaxPatternDepth, "steps (next month, day or page) on the way to a URL before a step is refused (0 = off)")
	fs.IntVar(&cfg.Scope.MaxQuerySets, "max-query-sets", cfg.Scope.MaxQuerySets, "query parameter name sets per path pattern of a host (0 = off)")
	fs.Int64Var(&cfg.MaxPages, "max-pages", cfg.MaxPages, "crawl budget: pages this node fetches before it starts no new request (0 = unlimited)")
	fs.DurationVar(&cfg.MaxDuration, "max-duration", cfg.MaxDuration, "crawl budget: time after the node's start when it starts no new request (0 = unlimited)")
	fs.StringVar(&cfg.Fetch.Proxy, "proxy", cfg.Fetch.Proxy, "HTTP(S) proxy URL for every request (default: $HTTPS_PROXY/$HTTP_PROXY, with $NO_PROXY)")
	fs.StringVar(&cfg.Log.Level, "log-level", cfg.Log.Level, "debug, info, warn or error")
	fs.StringVar(&cfg.Log.Format, "log-format", cfg.Log.Format, "text or json")
	fs.BoolVar(&cfg.WARC.Enabled, "warc", cfg.WARC.Enabled, "write WARC files")
	fs.Int64Var(&cfg.Fetch.MaxInflightBytes, "max-inflight-bytes", cfg.Fetch.MaxInflightBytes, "body bytes held in memory by all workers at once; past it bodies wait or spool to disk (0 = unbounded)")
	fs.StringVar(&cfg.Storage.MinFree, "min-free", cfg.Storage.MinFree, "free space the data directory keeps: below it the node starts no new request until it is back (bytes such as 512MiB, or a share such as 5%; 0 = off)")
	fs.StringVar(&cfg.Fetch.Parser, "parser", cfg.Fetch.Parser, "link extractor: fast or goquery")
	fs.BoolVar(&cfg.Fetch.Requisites, "requisites", cfg.Fetch.Requisites, "also fetch page requisites: style sheets, scripts, images, fonts, media")
	fs.StringVar(&cfg.Fetch.Sitemaps, "sitemaps", cfg.Fetch.Sitemaps, "sitemaps read: robots (robots.txt Sitemap: lines), all (and /sitemap.xml of every host) or off")
	fs.StringVar(&cfg.Cluster.Gossip, "gossip", cfg.Cluster.Gossip, "gossip address HOST:PORT: join a cluster (default: run alone)")
	fs.Var(commaList{&cfg.Cluster.Join}, "join", "gossip HOST:PORT of existing members (comma-separated, repeatable)")
	fs.StringVar(&cfg.Cluster.KeyFile, "cluster-key-file", cfg.Cluster.KeyFile, "file with the cluster key (16, 24 or 32 bytes, raw or base64)")
	fs.StringVar(&cfg.Cluster.Exchange, "exchange", cfg.Cluster.Exchange, "URL exchange listen address HOST:PORT (default: gossip port + 1)")
	fs.IntVar(&cfg.Cluster.Phases, "phases", cfg.Cluster.Phases, "host-hash phases (raised to the member count)")
	fs.DurationVar(&cfg.Cluster.PhaseDuration, "phase-duration", cfg.Cluster.PhaseDuration, "length of one phase epoch")
	fs.Var(&cfg.Bandwidth.Limit, "bandwidth", "download budget of this node in `BYTES_PER_S`: bytes per second, or with KB, MB, KiB, MiB (0 = unlimited)")
	fs.StringVar(&cfg.Bandwidth.Policy, "bandwidth-policy", cfg.Bandwidth.Policy, "how the budget is shared: maxt (sites finish together) or sumt (least sum of completion times)")
	fs.BoolVar(&cfg.ExitWhenDone, "exit-when-done", cfg.ExitWhenDone, "exit once the crawl is done (in a cluster: every member done, for done_grace); not with --revisit")
	fs.Var(stringList{&cfg.Cluster.NTP}, "ntp", "NTP server host[:port] for the cluster clock (repeatable; default: the local clock)")
}

// configPath finds --config in args before the flags are parsed, so that the
// file can be loaded first and the flags can override it.
func configPath(args []string) string {
	for i, a := range args {
		if a == "--" {
			break
		}
		for _, p := range []string{"--config", "-config"} {
			if a == p && i+1 < len(args) {
				return args[i+1]
			}
			if strings.HasPrefix(a, p+"=") {
				return strings.TrimPrefix(a, p+"=")
			}
		}
	}
	return ""
}

// decodeYAML decodes the configuration file data (named name) over cfg. Type errors and
// unknown keys name the dotted key they are about ("fetch.min_rate: line 3: cannot unmarshal
// ..."); a panic of the YAML library becomes an error.
func decodeYAML(name string, data []byte, cfg *Config) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("config: %s: YAML parser failed: %v", name, p)
		}
	}()
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("config: %s: %w", name, err)
	}
	if line, kind := badKey(&doc, 0); line > 0 {
		return fmt.Errorf("config: %s: yaml: line %d: a key must be a plain name, not a %s", name, line, kind)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return fmt.Errorf("config: %s: %w", name, err)
		}
		lines := yamlKeyLines(&doc)
		msgs := make([]string, len(te.Errors))
		for i, m := range te.Errors {
			msgs[i] = lines.name(m)
		}
		return fmt.Errorf("config: %s: %s", name, strings.Join(msgs, "; "))
	}
	return nil
}

// badKey returns the line and kind of the first mapping key that is not a
// scalar ("[]: x", "{a: b}: x"), which no configuration key can be; 0 when
// there is none.
func badKey(n *yaml.Node, depth int) (int, string) {
	if n == nil || depth > 64 {
		return 0, ""
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			switch k := n.Content[i]; k.Kind {
			case yaml.SequenceNode:
				return k.Line, "sequence"
			case yaml.MappingNode:
				return k.Line, "mapping"
			}
		}
	}
	for _, c := range n.Content {
		if line, kind := badKey(c, depth+1); line > 0 {
			return line, kind
		}
	}
	return 0, ""
}

// keyLines maps the lines of a YAML document to the dotted keys found there, by the kind of
// the value (yaml.v3's type errors name only a line and the kind of node they refused).
type keyLines struct {
	key    map[int]string // line of a key -> its dotted name
	scalar map[int]string // line of a scalar value -> the key it belongs to
	mapv   map[int]string // line of a mapping value -> its key
	seq    map[int]string // line of a sequence value -> its key
}

func yamlKeyLines(doc *yaml.Node) keyLines {
	kl := keyLines{key: map[int]string{}, scalar: map[int]string{}, mapv: map[int]string{}, seq: map[int]string{}}
	var walk func(n *yaml.Node, path string, depth int)
	walk = func(n *yaml.Node, path string, depth int) {
		if n == nil || depth > 64 {
			return
		}
		if path != "" {
			switch n.Kind {
			case yaml.ScalarNode, yaml.AliasNode:
				kl.scalar[n.Line] = path
			case yaml.MappingNode:
				kl.mapv[n.Line] = path
			case yaml.SequenceNode:
				kl.seq[n.Line] = path
			}
		}
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path, depth+1)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				if path != "" {
					k = path + "." + k
				}
				kl.key[n.Content[i].Line] = k
				walk(n.Content[i+1], k, depth+1)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i), depth+1)
			}
		}
	}
	walk(doc, "", 0)
	return kl
}

// name prefixes one yaml.v3 type error message ("line N: ...") with the key it is about.
func (kl keyLines) name(msg string) string {
	var line int
	if _, err := fmt.Sscanf(msg, "line %d:", &line); err != nil {
		return msg
	}
	m := kl.scalar
	switch {
	case strings.Contains(msg, " not found in type "), strings.Contains(msg, " already set in type "):
		m = kl.key
	case strings.Contains(msg, "cannot unmarshal !!map"):
		m = kl.mapv
	case strings.Contains(msg, "cannot unmarshal !!seq"):
		m = kl.seq
	}
	if k, ok := m[line]; ok {
		return k + ": " + msg
	}
	if k, ok := kl.key[line]; ok {
		return k + ": " + msg
	}
	return msg
}

// Keys lists every configuration key with its environment variable, in file order.
func Keys() []string {
	var keys []string
	walk(reflect.ValueOf(&Config{}).Elem(), "", func(key string, _ reflect.Value) error {
		keys = append(keys, key)
		return nil
	})
	return keys
}

// EnvName returns the environment variable that sets key ("bucket.rows" -> PHASECRAWL_BUCKET_ROWS).
func EnvName(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// ApplyEnv sets the fields of cfg named by PHASECRAWL_* variables, as Load
// does after the flags (lookupEnv is os.LookupEnv or a test's map; nil sets
// nothing). It does not validate cfg.
func ApplyEnv(cfg *Config, lookupEnv func(string) (string, bool)) error {
	if lookupEnv == nil {
		return nil
	}
	// PHASECRAWL_BANDWIDTH is the limit, as "bandwidth: 2MB" is in the file.
	if s, ok := lookupEnv(EnvPrefix + "BANDWIDTH"); ok {
		if err := cfg.Bandwidth.Limit.Set(s); err != nil {
			return fmt.Errorf("config: bandwidth (%sBANDWIDTH=%q): %w", EnvPrefix, s, err)
		}
	}
	return walk(reflect.ValueOf(cfg).Elem(), "", func(key string, v reflect.Value) error {
		s, ok := lookupEnv(EnvName(key))
		if !ok {
			return nil
		}
		if err := setValue(v, s); err != nil {
			return fmt.Errorf("config: %s (%s=%q): %w", key, EnvName(key), s, err)
		}
		return nil
	})
}

// walk calls fn for every leaf field of the struct v with its dotted key.
func walk(v reflect.Value, prefix string, fn func(key string, v reflect.Value) error) error {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		opts := strings.Split(f.Tag.Get("yaml"), ",")
		tag := opts[0]
		if f.Anonymous && slices.Contains(opts[1:], "inline") {
			if err := walk(v.Field(i), prefix, fn); err != nil {
				return err
			}
			continue
		}
		if tag == "" || tag == "-" {
			continue
		}
		key := tag
		if prefix != "" {
			key = prefix + "." + tag
		}
		fv := v.Field(i)
		if fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Struct {
			continue // lists of entries (sites) are set in the file only
		}
		if fv.Kind() == reflect.Struct {
			if err := walk(fv, key, fn); err != nil {
				return err
			}
			continue
		}
		if err := fn(key, fv); err != nil {
			return err
		}
	}
	return nil
}

var durationType = reflect.TypeOf(time.Duration(0))

func setValue(v reflect.Value, s string) error {
	if fv, ok := v.Addr().Interface().(flag.Value); ok {
		return fv.Set(s) // ByteRate: units accepted
	}
	switch {
	case v.Type() == durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("want a duration such as 500ms or 2s: %w", err)
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("want true or false")
		}
		v.SetBool(b)
	case v.Kind() == reflect.Int || v.Kind() == reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("want a whole number")
		}
		v.SetInt(n)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		var parts []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		v.Set(reflect.ValueOf(parts))
	default:
		return fmt.Errorf("unsupported type %s", v.Type())
	}
	return nil
}

// ReadSeeds returns the seeds of c.Seeds followed by those of c.SeedsFile
// (one URL a line; blank lines and lines starting with # are skipped).
func (c Config) ReadSeeds() ([]string, error) {
	seeds := append([]string(nil), c.Seeds...)
	if c.SeedsFile == "" {
		return seeds, nil
	}
	f, err := os.Open(c.SeedsFile)
	if err != nil {
		return nil, fmt.Errorf("config: seeds_file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		seeds = append(seeds, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("config: seeds_file %s: %w", c.SeedsFile, err)
	}
	return seeds, nil
}
