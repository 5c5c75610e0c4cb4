// Package diff compares two analyses of traffic - before and after a change - in retry-storm
// terms: per dependency and per calling service, the physical calls, the logical operations, the
// amplification and the product of the retrying layers, before and after; the findings matched by
// detector and place (caller -> dependency), never by trace id, so that two recordings of different
// requests compare; and a one-line verdict. Given a what-if prediction made from the before side,
// it also sets the prediction beside what the after side measured and says where the model was
// wrong.
//
// Figures are compared per operation (amplification per logical operation, findings per thousand
// operations analyzed), so more traffic after a change is not by itself a regression.
//
// Pure: two analyzer.Report values (and a whatif.Prediction) in, a Report out. Rendering is in
// analyzer/render; reading files and fetching live reports is the command's.
package diff
