// Package web is acphub's dashboard: the pages a browser or a phone
// loads from the hub, embedded in the binary.
//
// The pages are static files, written by hand (no build step, no
// third-party code), that speak only the hub's public API: the session
// stream (GET /api/sessions/events) for the inbox; for a session's page,
// its log (GET /api/sessions/KEY/events) and then a resumable connection
// (GET /acp?session=KEY&resume=new) attached after it; and the token
// routes for signing in. Every right is checked by the hub, not here: a
// page shows an observer no controls, and the hub refuses what a forged
// request of the observer's would do.
//
// The files are public, like any login page: what they show comes from
// the API, which needs the dashboard's cookie. They are served with a
// Content-Security-Policy that allows scripts, styles and connections of
// the hub's own origin only, no inline script or style, and no framing.
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var static embed.FS

// files are the static files, by the path they are served at.
var files = func() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic("web: " + err.Error())
	}
	return sub
}()

// Paths are the URL paths the dashboard serves: its pages ("/" alone and
// "/signin", which a sign-in link opens) and its files under /ui/.
var Paths = []string{"/", "/signin", "/ui/"}

// SecurityHeaders are sent with every file, and with the hub's other pages.
var SecurityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
		"connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "no-referrer",
	"X-Frame-Options":        "DENY",
}

// Serve answers a GET or HEAD of one of Paths: the page for "/" and
// "/signin", the file a path under /ui/ names; notFound answers a path
// under /ui/ that names no file.
func Serve(w http.ResponseWriter, r *http.Request, notFound http.Handler) {
	p := path.Clean(r.URL.Path)
	name := "index.html"
	if p != "/" && p != "/signin" {
		name = strings.TrimPrefix(p, "/ui/")
		if path.Dir(p) != "/ui" || name == "index.html" {
			notFound.ServeHTTP(w, r)
			return
		}
		if _, err := fs.Stat(files, name); err != nil {
			notFound.ServeHTTP(w, r)
			return
		}
	}
	for k, v := range SecurityHeaders {
		w.Header().Set(k, v)
	}
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeFileFS(w, r, files, name)
}
