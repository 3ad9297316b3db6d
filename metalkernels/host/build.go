package host

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/cpu"
	"golang.org/x/sys/unix"
)

//go:embed shim
var shimFS embed.FS

// Options configure Compile. The zero value works.
type Options struct {
	// CacheDir holds compiled objects and libraries, keyed by content hash.
	// Default: $SUZURAN_EMU_CACHE, else the user cache dir + suzuran/emu.
	CacheDir string
	// CXX is the C++ compiler. Default: $CXX, else g++, else c++.
	CXX string
	// Threads is how many OS threads a dispatch uses (0: runtime.NumCPU()).
	Threads int
	// PathPrefix is put before file names in compiler messages, so that
	// they name the file from the repository root ("metalkernels/").
	PathPrefix string
}

// Kernel TUs: MSL reads the same bytes as several types freely
// (-fno-strict-aliasing); unsuffixed float literals are float in MSL
// (-fsingle-precision-constant); Metal's attributes are blanked by the pass,
// but a few reach the compiler through macros (-Wno-attributes).
var kernelFlags = []string{
	"-std=c++17", "-O2", "-fPIC", "-fno-strict-aliasing", "-fsingle-precision-constant",
	"-fno-exceptions", "-fno-rtti", "-fvisibility=hidden", "-Wno-attributes",
	// Never fuse a·b + c behind the kernel's back: Go references compute
	// the same expressions unfused, and fma() stays available to kernels.
	"-ffp-contract=off",
	// Probe big stack frames page by page, so that a kernel whose locals
	// outgrow its fiber stack hits the guard page instead of the next
	// fiber's stack.
	"-fstack-clash-protection",
}

var runtimeFlags = []string{"-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden"}

// hostFlags lets fma() compile to the FMA instruction where the CPU has
// one, instead of a call into libm; results are the same (a fused
// multiply-add either way) and the ISO C++ mode keeps the compiler from
// fusing anything else.
func hostFlags() []string {
	if runtime.GOARCH == "amd64" && cpu.X86.HasFMA {
		return []string{"-mfma"}
	}
	return nil
}

func cacheDir(o Options) (string, error) {
	if o.CacheDir != "" {
		return o.CacheDir, nil
	}
	if d := os.Getenv("SUZURAN_EMU_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("emu: no cache directory (set SUZURAN_EMU_CACHE): %w", err)
	}
	return filepath.Join(d, "suzuran", "emu"), nil
}

var compilerIDs sync.Map // compiler path → version text

func findCXX(o Options) (string, string, error) {
	var cands []string
	if o.CXX != "" {
		cands = []string{o.CXX}
	} else if c := os.Getenv("CXX"); c != "" {
		cands = []string{c}
	} else {
		cands = []string{"g++", "c++", "clang++"}
	}
	for _, c := range cands {
		path, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		if id, ok := compilerIDs.Load(path); ok {
			return path, id.(string), nil
		}
		out, err := exec.Command(path, "--version").Output()
		if err != nil {
			continue
		}
		compilerIDs.Store(path, string(out))
		return path, string(out), nil
	}
	return "", "", fmt.Errorf("emu: no C++ compiler found (tried %s); install g++ or set CXX", strings.Join(cands, ", "))
}

func hashOf(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// writeAtomic writes data to path through a temporary file and a rename,
// so that concurrent builds (parallel test binaries) never see half a file.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// shimFiles returns the shim headers and runtime source with their hash.
func shimFiles() (map[string]string, string, error) {
	files := map[string]string{}
	var names []string
	err := fs.WalkDir(shimFS, "shim", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := shimFS.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "shim/")
		files[name] = string(b)
		names = append(names, name)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		parts = append(parts, n, files[n])
	}
	return files, hashOf(parts...), nil
}

// build is one Compile's plan: processed sources and the kernels found.
type build struct {
	opts     Options
	cxx, id  string
	dir      string
	shim     map[string]string
	shimHash string
	headers  map[string]string // processed header text by name
	units    map[string]string // processed .metal text (with entries) by name
	entries  []entry
	// passed is each .metal file's text after the pass alone (no shim
	// include, no entry points), and unitEntries its kernels, for
	// Translate.
	passed      map[string]string
	unitEntries map[string][]entry
}

func (b *build) prepare(sources map[string]string) error {
	b.headers = map[string]string{}
	b.units = map[string]string{}
	b.passed = map[string]string{}
	b.unitEntries = map[string][]entry{}
	var names []string
	for n := range sources {
		names = append(names, n)
	}
	sort.Strings(names)
	defines := map[string]string{}
	templates := map[string]*kernelDef{}
	results := map[string]*passResult{}
	var errs []error
	// The functions the headers define, for the lint's check of calls
	// into them from other files.
	known := map[string][]funcSig{}
	for _, n := range names {
		if err := lintIncludes(b.opts.PathPrefix+n, sources[n], sources); err != nil {
			errs = append(errs, err)
		}
		if !strings.HasSuffix(n, ".metal") {
			for k, v := range collectSignatures(sources[n]) {
				known[k] = append(known[k], v...)
			}
		}
	}
	// Headers first: their #defines may name buffer indices and they may
	// hold kernel templates.
	for _, n := range names {
		if strings.HasSuffix(n, ".metal") {
			continue
		}
		res, err := runPassKnown(b.opts.PathPrefix+n, sources[n], nil, known)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for k, v := range res.defines {
			defines[k] = v
		}
		for i := range res.kernels {
			if res.kernels[i].template {
				templates[res.kernels[i].name] = &res.kernels[i]
			}
		}
		b.headers[n] = fmt.Sprintf("#line 1 \"%s%s\"\n%s", b.opts.PathPrefix, n, res.out)
	}
	for _, n := range names {
		if !strings.HasSuffix(n, ".metal") {
			continue
		}
		res, err := runPassKnown(b.opts.PathPrefix+n, sources[n], defines, known)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		results[n] = res
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	hosts := map[string]string{}
	for _, n := range names {
		res, ok := results[n]
		if !ok {
			continue
		}
		local := map[string]*kernelDef{}
		for k, v := range templates {
			local[k] = v
		}
		for i := range res.kernels {
			if res.kernels[i].template {
				local[res.kernels[i].name] = &res.kernels[i]
			}
		}
		ents, err := collectEntries(b.opts.PathPrefix+n, res, local)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range ents {
			if prev, dup := hosts[e.host]; dup {
				errs = append(errs, &SourceError{e.file, e.line, fmt.Sprintf("kernel name %q is also defined at %s", e.host, prev)})
				continue
			}
			hosts[e.host] = fmt.Sprintf("%s:%d", e.file, e.line)
		}
		b.entries = append(b.entries, ents...)
		b.passed[n] = res.out
		b.unitEntries[n] = ents
		b.units[n] = fmt.Sprintf("#include \"emu_metal.h\"\n#line 1 \"%s%s\"\n%s\n%s", b.opts.PathPrefix, n, res.out, genEntries(ents))
	}
	return errors.Join(errs...)
}

// compile runs the compiler; its messages go into the error as they are,
// since the #line directives make them name the .metal file and line.
func (b *build) compile(args []string, out string) error {
	tmp := out + fmt.Sprintf(".tmp%d", os.Getpid())
	cmd := exec.Command(b.cxx, append(args, "-o", tmp)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		os.Remove(tmp)
		msg := stderr.String()
		if len(msg) > 16000 {
			msg = msg[:16000] + "\n…"
		}
		return fmt.Errorf("%s\n%s", err, msg)
	}
	return os.Rename(tmp, out)
}

func (b *build) run() (string, error) {
	var hparts, hnames []string
	for n := range b.headers {
		hnames = append(hnames, n)
	}
	sort.Strings(hnames)
	for _, n := range hnames {
		hparts = append(hparts, n, b.headers[n])
	}
	srcHash := hashOf(append([]string{b.shimHash}, hparts...)...)
	shimDir := filepath.Join(b.dir, "shim-"+b.shimHash)
	srcDir := filepath.Join(b.dir, "src-"+srcHash)
	objDir := filepath.Join(b.dir, "obj")

	var jobs []buildJob
	var unames []string
	for n := range b.units {
		unames = append(unames, n)
	}
	sort.Strings(unames)
	rtKey := hashOf(append([]string{"runtime", b.id, b.shimHash}, runtimeFlags...)...)
	jobs = append(jobs, buildJob{"emu_runtime.cc", rtKey, ""})
	for _, n := range unames {
		key := hashOf(append(append(append([]string{"unit", b.id, b.shimHash, srcHash, n, b.units[n]}, kernelFlags...), hostFlags()...), hparts...)...)
		jobs = append(jobs, buildJob{n, key, b.units[n]})
	}
	var keys, objs []string
	for _, j := range jobs {
		keys = append(keys, j.key)
		objs = append(objs, filepath.Join(objDir, j.key+".o"))
	}
	lib := filepath.Join(b.dir, "lib", hashOf(keys...)+".so")
	if exists(lib) {
		touch(append([]string{lib}, objs...))
		return lib, nil
	}

	// Building: one process at a time per cache, so that parallel test
	// binaries wait for one build instead of each compiling everything.
	if err := os.MkdirAll(objDir, 0o755); err != nil {
		return "", fmt.Errorf("emu: cache directory: %w", err)
	}
	unlock, err := lockDir(b.dir)
	if err != nil {
		return "", err
	}
	defer unlock()
	if exists(lib) {
		touch(append([]string{lib}, objs...))
		return lib, nil
	}
	if err := b.writeSources(shimDir, srcDir); err != nil {
		return "", err
	}
	if err := b.compileAll(jobs, objs, shimDir, srcDir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(lib), 0o755); err != nil {
		return "", err
	}
	args := append([]string{"-shared", "-fPIC"}, objs...)
	args = append(args, "-lpthread")
	if err := b.compile(args, lib); err != nil {
		return "", fmt.Errorf("emu: linking the kernel library: %w", err)
	}
	prune(b.dir)
	return lib, nil
}

// buildJob is one object of the kernel library: the runner (src "") or a
// translation unit, cached under key.
type buildJob struct{ name, key, src string }

// writeSources writes the shim and the headers the units include, where
// they are not yet.
func (b *build) writeSources(shimDir, srcDir string) error {
	if !exists(filepath.Join(shimDir, "emu_metal.h")) || !exists(filepath.Join(shimDir, "emu_runtime.cc")) {
		for n, t := range b.shim {
			if err := writeAtomic(filepath.Join(shimDir, n), []byte(t)); err != nil {
				return err
			}
		}
	}
	for n, t := range b.headers {
		p := filepath.Join(srcDir, n)
		if !exists(p) {
			if err := writeAtomic(p, []byte(t)); err != nil {
				return err
			}
		}
	}
	return nil
}

// compileAll compiles each job whose object (objs[i]) is not cached yet,
// as many at once as there are CPUs.
func (b *build) compileAll(jobs []buildJob, objs []string, shimDir, srcDir string) error {
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.NumCPU())
	for i, j := range jobs {
		obj := objs[i]
		if exists(obj) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if j.src == "" {
				errs[i] = b.compile(append(append([]string{}, runtimeFlags...), "-c", filepath.Join(shimDir, "emu_runtime.cc")), obj)
				if errs[i] != nil {
					errs[i] = fmt.Errorf("emu: compiling the runner: %w", errs[i])
				}
				return
			}
			src := filepath.Join(srcDir, j.name+"."+j.key[:8]+".cc")
			if err := writeAtomic(src, []byte(j.src)); err != nil {
				errs[i] = err
				return
			}
			args := append(append(append([]string{}, kernelFlags...), hostFlags()...), "-I", shimDir, "-I", srcDir, "-c", src)
			if err := b.compile(args, obj); err != nil {
				errs[i] = fmt.Errorf("emu: compiling %s%s: %w", b.opts.PathPrefix, j.name, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// lockDir takes an exclusive lock on dir/.lock, waiting for other
// processes' builds.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("emu: locking the build cache: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("emu: locking the build cache %s: %w", dir, err)
	}
	return func() {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

// touch marks cache files as used, for prune.
func touch(paths []string) {
	now := time.Now()
	for _, p := range paths {
		os.Chtimes(p, now, now)
	}
}

// pruneAge: cache entries unused this long are deleted after a build, so
// that a cache kept across many kernel edits does not grow without bound.
const pruneAge = 14 * 24 * time.Hour

func prune(dir string) {
	cutoff := time.Now().Add(-pruneAge)
	for _, sub := range []string{"obj", "lib"} {
		ents, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil {
			continue
		}
		for _, e := range ents {
			if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
				os.Remove(filepath.Join(dir, sub, e.Name()))
			}
		}
	}
	// Source and shim directories are only read while compiling; old ones
	// go by their own time.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		n := e.Name()
		if !e.IsDir() || !(strings.HasPrefix(n, "src-") || strings.HasPrefix(n, "shim-")) {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
			os.RemoveAll(filepath.Join(dir, n))
		}
	}
}
