package placement

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Kueue v0.17's TAS messages (pkg/cache/scheduler/tas_flavor_snapshot.go and
// pkg/scheduler/flavorassigner/tas_flavorassigner.go), which follow a small
// grammar.
var (
	fitOnlyRE    = regexp.MustCompile(`topology "([^"]+)" allows to fit only (\d+) out of (\d+) (pod|slice)\(s\)`)
	fitNoneRE    = regexp.MustCompile(`topology "([^"]+)" doesn't allow to fit any of (\d+) (pod|slice)\(s\)`)
	fitLayersRE  = regexp.MustCompile(`topology "([^"]+)" doesn't allow to fit((?:; \d+/\d+ slice\(s\) fit on level [^;\s]+)+)`)
	layerRE      = regexp.MustCompile(`(\d+)/(\d+) slice\(s\) fit on level ([^;\s]+)`)
	excludedRE   = regexp.MustCompile(`Total nodes: (\d+); excluded: ([^;]*)`)
	exclusionRE  = regexp.MustCompile(`(nodeSelector|affinity|topologyDomain|taint "[^"]*"|resource "[^"]*"): (\d+)`)
	noTASRE      = regexp.MustCompile(`Flavor "([^"]+)" does not support TopologyAwareScheduling`)
	noLevelRE    = regexp.MustCompile(`Flavor "([^"]+)" does not contain the requested level`)
	onlyTASRE    = regexp.MustCompile(`Flavor "([^"]+)" supports only TopologyAwareScheduling`)
	twoTASRE     = regexp.MustCompile(`more than one TAS flavor assigned: (.+)`)
	podSetNameRE = regexp.MustCompile(`pod set (\S+): `)
)

// Explanation is a Kueue TAS message in a researcher's words.
type Explanation struct {
	// Text is one sentence, without a final period.
	Text string
	// Fix is true when waiting will not help: the platform's flavors and
	// the run's placement do not go together, so someone must change one.
	Fix bool
}

// Explain turns the part of a Kueue message about topology into plain
// words; ok is false when the message says nothing about topology.
func Explain(msg string) (Explanation, bool) {
	who := ""
	if m := podSetNameRE.FindStringSubmatch(msg); m != nil && m[1] != "main" {
		who = podSetWord(m[1]) + " "
	}
	switch {
	case fitOnlyRE.MatchString(msg):
		m := fitOnlyRE.FindStringSubmatch(msg)
		text := fmt.Sprintf("placement: only %s of the run's %s %s fit as asked on topology %s now", m[2], m[3], units(m[3], who+m[4]), m[1])
		return Explanation{Text: text + excluded(msg)}, true
	case fitNoneRE.MatchString(msg):
		m := fitNoneRE.FindStringSubmatch(msg)
		text := fmt.Sprintf("placement: none of the run's %s %s fit as asked on topology %s now", m[2], units(m[2], who+m[3]), m[1])
		if m[2] == "1" {
			text = fmt.Sprintf("placement: the run's %s does not fit as asked on topology %s now", who+m[3], m[1])
		}
		return Explanation{Text: text + excluded(msg)}, true
	case fitLayersRE.MatchString(msg):
		m := fitLayersRE.FindStringSubmatch(msg)
		var parts []string
		for _, l := range layerRE.FindAllStringSubmatch(m[2], -1) {
			parts = append(parts, fmt.Sprintf("%s of %s groups fit per %s", l[1], l[2], LevelName(l[3])))
		}
		return Explanation{Text: fmt.Sprintf("placement: the run's %spods do not fit as asked on topology %s now (%s)", who, m[1], strings.Join(parts, ", ")) + excluded(msg)}, true
	case noTASRE.MatchString(msg):
		m := noTASRE.FindStringSubmatch(msg)
		return Explanation{Text: fmt.Sprintf("placement: the run asks for a placement, but flavor %s has no topology; use compute.placement: any, or a profile with a topology", m[1]), Fix: true}, true
	case noLevelRE.MatchString(msg):
		m := noLevelRE.FindStringSubmatch(msg)
		return Explanation{Text: fmt.Sprintf("placement: flavor %s's topology has no such level; ask for one of the levels the platform lists", m[1]), Fix: true}, true
	case onlyTASRE.MatchString(msg):
		m := onlyTASRE.FindStringSubmatch(msg)
		return Explanation{Text: fmt.Sprintf("placement: flavor %s places pods only by topology, and this pod set asks for none the platform allows", m[1]), Fix: true}, true
	case twoTASRE.MatchString(msg):
		m := twoTASRE.FindStringSubmatch(msg)
		return Explanation{Text: "placement: one pod set got two flavors with topologies (" + strings.TrimSpace(m[1]) + "); the platform's queue must give each pod set one", Fix: true}, true
	}
	return Explanation{}, false
}

// podSetWord names Kueue's pod sets of a RayJob as a researcher knows them.
func podSetWord(ps string) string {
	switch ps {
	case "head":
		return "Ray head"
	case "submitter":
		return "Ray job submitter"
	}
	return "Ray worker (" + ps + ")"
}

// excluded is "; of 4 nodes, 2 lack the profile's node labels, 1 has taint
// key=value:NoSchedule (not tolerated), 1 lacks free nvidia.com/gpu": short,
// since the first words of it go into a commit status.
func excluded(msg string) string {
	m := excludedRE.FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	var parts []string
	for _, e := range exclusionRE.FindAllStringSubmatch(m[2], -1) {
		n, _ := strconv.Atoi(e[2])
		parts = append(parts, exclusionWords(e[1], n))
	}
	return fmt.Sprintf("; of %s nodes, %s", m[1], strings.Join(parts, ", "))
}

func exclusionWords(reason string, n int) string {
	lack, has, is := "lack", "have", "are"
	if n == 1 {
		lack, has, is = "lacks", "has", "is"
	}
	switch {
	case reason == "nodeSelector":
		return fmt.Sprintf("%d %s the profile's node labels", n, lack)
	case reason == "affinity":
		return fmt.Sprintf("%d %s outside the run's node affinity (such as nodes avoided after a GPU fault)", n, is)
	case reason == "topologyDomain":
		return fmt.Sprintf("%d %s outside the domain the run is held to", n, is)
	case strings.HasPrefix(reason, "taint "):
		return fmt.Sprintf("%d %s taint %s (not tolerated)", n, has, strings.Trim(reason[len("taint "):], `"`))
	default:
		return fmt.Sprintf("%d %s free %s", n, lack, strings.Trim(reason[len("resource "):], `"`))
	}
}

// units is "pods" or "pod" (count "1"), after the words before it.
func units(count, noun string) string {
	if count == "1" {
		return noun
	}
	return noun + "s"
}
