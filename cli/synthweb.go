package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/demo/webnode"
)

// cmdSynthweb serves the synthetic web on one listener and prints the
// phasecrawl run command that crawls it (for trying phasecrawl by hand;
// the process tests run it as the web of their nodes).
func cmdSynthweb(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("synthweb", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8080", "listen address")
	hosts := fs.Int("hosts", synthweb.DefaultConfig().Hosts, "hosts")
	pages := fs.Int("pages", synthweb.DefaultConfig().Pages, "pages")
	seed := fs.Int64("seed", synthweb.DefaultConfig().Seed, "generator seed")
	domain := fs.String("domain", synthweb.DefaultConfig().Domain, "parent domain of every host")
	traps := fs.Int("trap-hosts", synthweb.DefaultConfig().TrapHosts, "spider-trap hosts (infinite calendars)")
	seeds := fs.Int("seeds", synthweb.DefaultConfig().Seeds, "seed home pages")
	slow := fs.Float64("slow-hosts", synthweb.DefaultConfig().SlowHosts, "fraction of hosts that answer slowly")
	crawlDelay := fs.Float64("crawl-delay-hosts", synthweb.DefaultConfig().CrawlDelayHosts, "fraction of hosts whose robots.txt has a Crawl-delay")
	changeEvery := fs.Duration("change-every", 0, "a fraction --changing-pages of the pages change this often (whole seconds; 0: never)")
	changing := fs.Float64("changing-pages", 0, "fraction of the pages that change every --change-every")
	validators := fs.Bool("validators", false, "pages carry ETag and Last-Modified and answer conditional GETs with 304")
	if err := fs.Parse(args); err != nil {
		return err
	}
	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages, wc.Seed = *hosts, *pages, *seed
	wc.Domain, wc.TrapHosts, wc.Seeds = *domain, *traps, *seeds
	wc.SlowHosts, wc.CrawlDelayHosts = *slow, *crawlDelay
	wc.ChangeEvery, wc.ChangingPages, wc.Validators = *changeEvery, *changing, *validators
	web, err := synthweb.New(wc)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "synthetic web: %d hosts, %d pages on %s\n", wc.Hosts, wc.Pages, *listen)
	fmt.Fprintf(stdout, "crawl it with:\n  phasecrawl run --allow-domain %s --resolve '%s=%s' --max-pages-per-host %d", wc.Domain, web.ResolvePattern(), *listen, webnode.MaxPagesPerHost)
	for _, s := range web.Seeds() {
		fmt.Fprintf(stdout, " --seed %s", s)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintf(stdout, "what it served (JSON): http://%s%s\n", *listen, synthweb.ReportPath)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Addr: *listen, Handler: web.WithReport(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		return fmt.Errorf("listen %s: %w", *listen, err)
	}
	return nil
}
