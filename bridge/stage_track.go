package bridge

// tracker folds component states into job states and ends jobs (track,
// finish, end), and retries a failed attempt.
type tracker struct {
	part
	*copies       // the copies of QoS-tiered jobs
	*reservations // a job's reservation ends with it
	*intake       // the output root, checked again before a fetch
}
