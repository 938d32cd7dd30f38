package repository

const (
	DefaultRepositoryWorkers = 16
)
