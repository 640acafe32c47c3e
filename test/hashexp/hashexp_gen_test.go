package hashexp

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateSiteList = flag.Bool("update-site-list", false, "regenerate testdata/university_urls.txt")

const siteListPath = "testdata/university_urls.txt"

// siteListHeader is the honest note at the top of the generated list.
const siteListHeader = `# university_urls.txt — URL list shaped like a large university web site.
#
# HOW THIS FILE WAS MADE: it was NOT crawled. The machine that produced it had
# no internet access, so it was generated offline, deterministically, by
# TestGenerateSiteList in test/hashexp/hashexp_gen_test.go:
#     go test ./test/hashexp -run TestGenerateSiteList -update-site-list
# It imitates the structure of a real public university site (the kind of site
# KSpider crawled): about 100 hosts -- a main www host, faculty and department
# hosts with some lab hosts under them, central service hosts (news, library,
# registrar, ...), a people host with ~user home pages -- and typical path
# shapes: news/YYYY/MM/slug, events/YYYY/MM/DD/slug, people/~name/,
# courses/CODE/lecture-NN.pdf,
# wp-content/uploads/YYYY/MM/file.pdf, listing pages with ?page=N, library
# search?q=...&page=N, repository handle/NNNNN/NNNN. Host sizes are skewed
# (Zipf-like), as on real sites. The domain example.edu is a placeholder; host
# and path names are invented. Use it for hash-distribution experiments only.
#
# One normalized absolute URL per line; lines starting with # are comments.
`

var (
	genWords = strings.Fields(`research student faculty award campus science engineering
		agriculture community innovation project seminar workshop conference lecture
		open house scholarship exchange program annual report energy water climate
		rice forest fisheries food safety health medicine veterinary economics policy
		digital data robot ai network security smart farming startup alumni sports
		festival ceremony graduation admission international cooperation ministry
		industry partnership lab opening new building library museum exhibition art
		culture music thai english language training course online learning teacher
		young talent competition winner team national world ranking publication
		journal book launch visit delegation university king royal project green
		sustainable development goal biodiversity soil plant animal vaccine covid
		recovery economy tourism market rural village mobile app platform cloud`)
	genNames = strings.Fields(`somchai somsak suda malee pranee wichai anan kittisak
		narong pornthip sirirat thanawat chaiwat jirapa kanokwan nattapong pattara
		rattana surachai supaporn tanakorn uthai wanida yupin boonmee chanchai
		danai ekachai kamol lamai montri niran orawan pichit rungroj saowanee
		teerawat udom vichai waraporn arunee benjawan chalerm duangjai
		jsmith mlee kchen rpatel tnguyen akim dgarcia swang lmartin pjones`)
	genFaculties = strings.Fields(`eng sci agr econ hum soc edu med vet arch law bus fish forest pharm nurse env agro`)
	genDepts     = map[string][]string{
		"eng":  {"cpe", "ee", "me", "ce", "che", "ie", "mat", "aero", "water"},
		"sci":  {"cs", "math", "stat", "phys", "chem", "bio", "bchm", "micro", "zoo", "bot"},
		"agr":  {"agron", "soil", "ento", "horti", "animal"},
		"econ": {"agecon", "dev"},
		"hum":  {"eng-lang", "thai", "hist", "philo", "music"},
		"soc":  {"pol", "soc-anth", "geo"},
	}
	genServices = strings.Fields(`news library registrar admission research alumni sports events
		careers it hr finance grad international housing health museum press jobs calendar
		repository elearning mail vpn webmail opac ir map`)
)

// genSite builds the list; see siteListHeader.
func genSite(seed uint64, target int) []string {
	r := rand.New(rand.NewPCG(seed, 2003))
	const dom = "example.edu"
	type host struct {
		name string
		kind string
	}
	hosts := []host{{"www." + dom, "main"}, {"people." + dom, "people"}}
	for _, s := range genServices {
		hosts = append(hosts, host{s + "." + dom, s})
	}
	for _, f := range genFaculties {
		hosts = append(hosts, host{f + "." + dom, "faculty"})
		for _, d := range genDepts[f] {
			hosts = append(hosts, host{d + "." + f + "." + dom, "dept"})
			if r.IntN(3) == 0 {
				hosts = append(hosts, host{"lab-" + genWords[r.IntN(len(genWords))] + "." + d + "." + f + "." + dom, "lab"})
			}
		}
	}
	// Zipf-like host sizes: www first, then a random order of the others.
	rest := hosts[1:]
	r.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	weights := make([]float64, len(hosts))
	var sum float64
	for i := range hosts {
		weights[i] = 1 / float64(i+1)
		sum += weights[i]
	}
	slug := func() string {
		n := 3 + r.IntN(5)
		w := make([]string, n)
		for i := range w {
			w[i] = genWords[r.IntN(len(genWords))]
		}
		return strings.Join(w, "-")
	}
	year := func() int { return 2005 + r.IntN(20) }
	code := func() string {
		return fmt.Sprintf("%s%d", strings.ToUpper(genFaculties[r.IntN(len(genFaculties))][:2]), 100+r.IntN(400))
	}
	lang := func() string { return []string{"", "/th", "/en"}[r.IntN(3)] }
	page := func(h host) string {
		base := "https://" + h.name
		switch k := r.IntN(100); {
		case h.kind == "vpn" || h.kind == "mail" || h.kind == "webmail" || h.kind == "map":
			return fmt.Sprintf("%s/%s?id=%d", base, []string{"help", "login", "faq", "guide"}[r.IntN(4)], r.IntN(500))
		case h.kind == "people" || (h.kind == "main" && k < 8):
			u := genNames[r.IntN(len(genNames))] + fmt.Sprint(r.IntN(30))
			return base + "/~" + u + []string{"/", "/publications.html", "/teaching/" + code() + ".html", "/cv.pdf", "/students.html"}[r.IntN(5)]
		case h.kind == "news" || k < 30:
			if r.IntN(6) == 0 {
				return fmt.Sprintf("%s%s/news/?page=%d", base, lang(), 1+r.IntN(200))
			}
			return fmt.Sprintf("%s%s/news/%d/%02d/%s/", base, lang(), year(), 1+r.IntN(12), slug())
		case h.kind == "events" || k < 40:
			return fmt.Sprintf("%s/events/%d/%02d/%02d/%s", base, year(), 1+r.IntN(12), 1+r.IntN(28), slug())
		case h.kind == "library" || h.kind == "opac":
			return fmt.Sprintf("%s/search?q=%s&page=%d", base, genWords[r.IntN(len(genWords))], 1+r.IntN(50))
		case h.kind == "repository" || h.kind == "ir":
			return fmt.Sprintf("%s/handle/%d/%d", base, 10000+r.IntN(90), r.IntN(9000))
		case k < 55:
			return fmt.Sprintf("%s/wp-content/uploads/%d/%02d/%s.pdf", base, year(), 1+r.IntN(12), slug())
		case k < 70:
			c := code()
			return base + "/courses/" + c + []string{"/", fmt.Sprintf("/lecture-%02d.pdf", 1+r.IntN(15)), fmt.Sprintf("/hw-%02d.html", 1+r.IntN(10)), "/syllabus.html"}[r.IntN(4)]
		case k < 78:
			y := year()
			return fmt.Sprintf("%s/catalog/%d-%d/courses/%s", base, y, y+1, code())
		case k < 85:
			return fmt.Sprintf("%s/directory/?dept=%s&page=%d", base, genFaculties[r.IntN(len(genFaculties))], 1+r.IntN(20))
		default:
			return base + lang() + "/" + []string{"about", "contact", "history", "vision", "staff", "programs", "admissions", "facilities", "downloads", "sitemap"}[r.IntN(10)] + "/"
		}
	}
	seen := make(map[string]bool, target)
	urls := make([]string, 0, target)
	add := func(u string) {
		if !seen[u] {
			seen[u] = true
			urls = append(urls, u)
		}
	}
	for _, h := range hosts {
		add("https://" + h.name + "/")
	}
	for len(urls) < target {
		x := r.Float64() * sum
		i := 0
		for ; i < len(hosts)-1 && x >= weights[i]; i++ {
			x -= weights[i]
		}
		add(page(hosts[i]))
	}
	return urls
}

// TestGenerateSiteList regenerates the list with -update-site-list, and
// otherwise checks that the committed file is what the generator makes.
func TestGenerateSiteList(t *testing.T) {
	urls := genSite(4, 20000)
	want := siteListHeader + strings.Join(urls, "\n") + "\n"
	if *updateSiteList {
		if err := os.MkdirAll(filepath.Dir(siteListPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(siteListPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(siteListPath)
	if err != nil {
		t.Fatalf("%v (regenerate with -update-site-list)", err)
	}
	if string(got) != want {
		t.Fatalf("%s differs from the generator's output (regenerate with -update-site-list)", siteListPath)
	}
	if len(urls) != 20000 || len(slices.Compact(slices.Sorted(slices.Values(urls)))) != 20000 {
		t.Fatalf("got %d URLs", len(urls))
	}
}
