package retryamplification

// MayFire exposes the first look to the external tests.
var MayFire = mayFire
