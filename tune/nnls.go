package tune

import "math"

// nnls solves min ‖Xβ − y‖² subject to β ≥ 0 by cyclic coordinate
// descent on the normal equations (G = XᵀX, b = Xᵀy): each step sets one
// β_j to the minimiser of the objective in that coordinate, clipped at 0.
// The objective is convex and the clipped coordinate steps never raise
// it, so the sweeps converge to the optimum. With six unknowns this is a
// few dozen lines and exact to the tolerance, where a general optimiser
// would need bounds it does not have (gonum/optimize) or a dependency for
// one function. Columns with G_jj = 0 (no variation) get β_j = 0.
func nnls(g [][]float64, b []float64) []float64 {
	p := len(b)
	beta := make([]float64, p)
	for sweep := 0; sweep < 100000; sweep++ {
		var moved float64
		for j := 0; j < p; j++ {
			if g[j][j] <= 0 {
				continue
			}
			grad := b[j]
			for k := 0; k < p; k++ {
				grad -= g[j][k] * beta[k]
			}
			next := math.Max(0, beta[j]+grad/g[j][j])
			moved = math.Max(moved, math.Abs(next-beta[j]))
			beta[j] = next
		}
		if moved < 1e-13 {
			break
		}
	}
	return beta
}
