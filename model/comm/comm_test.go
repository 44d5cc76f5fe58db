package comm

import (
	"os"
	"strings"
	"testing"
)

// TestLaunchFromEnv reads each launcher's variables and rejects bad ones.
func TestLaunchFromEnv(t *testing.T) {
	vars := []string{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
		"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "RANK", "WORLD_SIZE", "LOCAL_RANK"}
	for _, c := range []struct {
		env  map[string]string
		want Launch
		err  string
	}{
		{map[string]string{}, Launch{Size: 1}, ""},
		{map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "1"}, Launch{3, 8, 1, "mpirun"}, ""},
		{map[string]string{"SLURM_PROCID": "5", "SLURM_NTASKS": "16", "SLURM_LOCALID": "5"}, Launch{5, 16, 5, "srun"}, ""},
		{map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}, Launch{1, 2, 0, "torchrun"}, ""},
		{map[string]string{"RANK": "2", "WORLD_SIZE": "2"}, Launch{}, "outside a world of 2"},
		{map[string]string{"SLURM_PROCID": "x", "SLURM_NTASKS": "2"}, Launch{}, "SLURM_PROCID"},
		{map[string]string{"OMPI_COMM_WORLD_RANK": "0"}, Launch{}, "OMPI_COMM_WORLD_SIZE"},
	} {
		for _, v := range vars {
			t.Setenv(v, "") // registers the restore
			os.Unsetenv(v)
		}
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		got, err := LaunchFromEnv()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: error %v, want one naming %q", c.env, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%v: %+v, %v; want %+v", c.env, got, err, c.want)
		}
	}
}
