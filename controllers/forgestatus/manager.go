package forgestatus

const (
	DefaultForgeWorkers = 8
)
