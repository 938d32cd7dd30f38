package evidence

import (
	"strings"
	"time"
)

// Page is where the evidence page is served and how links to it are
// signed. The run controller sets each run's status.evidenceURL from it;
// the evidence controller seals what the link opens.
type Page struct {
	// URL is the external base of the evidence page; "" sets no link.
	URL string
	// Links signs the link, so whoever reads the commit opens that run's
	// page until the link expires; nil links to the page unsigned (it
	// then needs the team's token).
	Links *Links
}

// RunURL is the link to run namespace/name's page, signed to expire
// Links.TTL after the run was created: the same URL at every reconcile,
// so the commit status is not posted again for it. It is "" when the page
// has no external URL.
func (p *Page) RunURL(namespace, name string, created time.Time) string {
	if p == nil || p.URL == "" {
		return ""
	}
	u := strings.TrimRight(p.URL, "/") + "/runs/" + namespace + "/" + name
	if p.Links != nil {
		u += "?" + p.Links.Query(namespace, name, created.Add(p.Links.TTL))
	}
	return u
}
