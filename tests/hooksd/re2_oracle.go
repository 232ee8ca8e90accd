// Prints Go's verdict on each regular expression read from standard input (a JSON array of strings) as a JSON
// array: null where regexp.Compile accepts the pattern, its error text where it does not. Used only to refresh
// tests/hooksd/data/re2_verdicts.jsonl (see tests/hooksd/regex_corpus.py); the tests read the recorded verdicts.
package main

import (
	"encoding/json"
	"os"
	"regexp"
)

func main() {
	var patterns []string
	if err := json.NewDecoder(os.Stdin).Decode(&patterns); err != nil {
		panic(err)
	}
	verdicts := make([]*string, len(patterns))
	for i, pattern := range patterns {
		if _, err := regexp.Compile(pattern); err != nil {
			text := err.Error()
			verdicts[i] = &text
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(verdicts); err != nil {
		panic(err)
	}
}
