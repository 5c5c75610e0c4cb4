// Package words holds the few rules every screen and report of stormwatch writes counts with:
// thousands separators and singular or plural nouns ("1 finding", "27 calls"), so the dashboard,
// the reports and the status lines never disagree on how a number reads.
package words
