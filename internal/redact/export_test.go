package redact

// NewSearchingAll is New with a Redactor that searches for every rule in
// the whole text, as a reference for the one that searches only where a
// rule can match.
func NewSearchingAll(extra []Rule) (*Redactor, error) {
	r, err := New(extra)
	if err == nil {
		r.searchAll = true
	}
	return r, err
}
