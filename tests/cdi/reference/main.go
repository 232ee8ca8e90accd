// cdi-reference prints the CDI Go library's own verdict on spec files and spec directories, one JSON
// document per line, for the agreement tests in tests/cdi.
//
//	cdi-reference version          the library release it was built against
//	cdi-reference files PATH...    per file: does cdi.ReadSpec accept it, and its error or panic
//	cdi-reference dirs DIR...      what a cdi.Cache over the directories (lowest priority first) holds
//
// It is built by tests/cdi/setup.sh against Debian's packaged library, in GOPATH mode, offline.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
)

// Set at build time from the Debian package's version.
var libraryVersion = "unknown"

type fileVerdict struct {
	Path    string   `json:"path"`
	OK      bool     `json:"ok"`
	Error   string   `json:"error,omitempty"`
	Panic   string   `json:"panic,omitempty"`
	Devices []string `json:"devices,omitempty"`
}

type dirsVerdict struct {
	// qualified device name -> the spec file that provides it
	Devices map[string]string `json:"devices"`
	// spec file -> the errors the cache recorded for it
	Errors map[string][]string `json:"errors"`
	Panic  string              `json:"panic,omitempty"`
}

func readSpec(path string) (verdict fileVerdict) {
	verdict.Path = path
	defer func() {
		if r := recover(); r != nil {
			verdict.OK = false
			verdict.Panic = fmt.Sprint(r)
		}
	}()
	spec, err := cdi.ReadSpec(path, 0)
	if err != nil {
		verdict.Error = err.Error()
		return verdict
	}
	verdict.OK = true
	for _, device := range spec.Devices {
		verdict.Devices = append(verdict.Devices, parser.QualifiedName(spec.GetVendor(), spec.GetClass(), device.Name))
	}
	return verdict
}

func readDirs(dirs []string) (verdict dirsVerdict) {
	verdict.Devices = map[string]string{}
	verdict.Errors = map[string][]string{}
	defer func() {
		if r := recover(); r != nil {
			verdict.Panic = fmt.Sprint(r)
		}
	}()
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dirs...), cdi.WithAutoRefresh(false))
	if cache == nil {
		verdict.Panic = fmt.Sprint("no cache: ", err)
		return verdict
	}
	for _, name := range cache.ListDevices() {
		verdict.Devices[name] = cache.GetDevice(name).GetSpec().GetPath()
	}
	for path, errs := range cache.GetErrors() {
		for _, e := range errs {
			verdict.Errors[path] = append(verdict.Errors[path], e.Error())
		}
		sort.Strings(verdict.Errors[path])
	}
	return verdict
}

func main() {
	out := json.NewEncoder(os.Stdout)
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: cdi-reference version | files PATH... | dirs DIR...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "version":
		fmt.Println(libraryVersion)
	case "files":
		for _, path := range os.Args[2:] {
			if err := out.Encode(readSpec(path)); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
	case "dirs":
		if err := out.Encode(readDirs(os.Args[2:])); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
}
