#pragma once
// How many threads tapegrad's ops run on: one pool for the whole library (ops/kernels/parallel.h).
// Results do not depend on the count: each output element is computed by one thread in a fixed
// order.
//
//   tg::set_num_threads(1);   // everything on the calling thread
namespace tg {

// The pool's size now.
int num_threads();
// Sets the pool size (1 = everything on the calling thread). The environment variable
// TG_NUM_THREADS sets the initial value; the default is the cores this process may run on (its
// affinity), divided among the processes of an mpirun launch on this machine when they are unbound.
void set_num_threads(int n);

}  // namespace tg
