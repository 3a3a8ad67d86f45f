/* How to move 16 MiB between two processes of one host with CMA, three ways,
 * timed in the receiver (a forked child) against a sender (the parent) that
 * spins on a shared control page:
 *   0  the receiver reads it all with one process_vm_readv (what
 *      src/transport/shm/cma.rs does below SHARED_READ);
 *   1  two threads of the receiver each read half (what cma::Reader's
 *      helper thread does from SHARED_READ);
 *   2  the receiver reads the first half while the sender writes the second
 *      with process_vm_writev into the receiver's buffer (issue 15's idea:
 *      both processes copy at once).
 * HUGE: bit 0 asks for transparent huge pages on the source, bit 1 on the
 * destination (madvise(MADV_HUGEPAGE) before the first touch).
 *
 *   cc -O2 -pthread -o cma_split benches/cma_split.c && ./cma_split [HUGE] [REPS]
 *
 * 2026-12-03 11:03 UTC, 2 vCPUs (AMD EPYC, KVM), load 1.6-1.8, 20 reps,
 * medians (min-max), three runs without huge pages:
 *   0 whole: 4.57 (3.93-6.64), 3.74 (3.57-5.59), 3.58 (3.09-7.32) ms
 *   1 two receiver threads: 4.87 (4.00-11.8), 3.49 (2.83-4.13), 3.72 (2.88-4.28) ms
 *   2 receiver half + sender half: 2.69 (2.12-5.80), 1.72 (1.61-2.96), 2.29 (1.90-4.51) ms
 * with huge pages on both (HUGE=3): 1.88, 1.94, 1.18 ms.
 *
 * Since 2026-12-04 the sender sleeps (200 us naps) under modes 0 and 1, as
 * a sender's worker does while its 4 MiB+ buffer is read, so that the
 * receiver's second thread has the other core. 00:08 UTC, quiet, fast
 * state, 20 reps, medians (min) of two runs: 0 whole 1.93 (1.87), 1.85
 * (1.81); 1 two receiver threads 1.89 (1.02), 1.91 (1.09); 2 receiver +
 * sender 0.97 (0.93), 0.97 (0.92) ms. What src/transport/shm/split.rs does.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <pthread.h>
#include <time.h>
#include <stdatomic.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
#define N (16<<20)
struct ctl{_Atomic long go; _Atomic long done_s; _Atomic long done_r; char* _Atomic src; char* _Atomic dst; pid_t spid; _Atomic pid_t rpid; _Atomic int mode; };
static struct ctl*c;
static void rd(pid_t p,char*d,char*s,size_t n){struct iovec l={d,n},r={s,n};if(process_vm_readv(p,&l,1,&r,1,0)!=(ssize_t)n)abort();}
static void wr(pid_t p,char*d,char*s,size_t n){struct iovec l={s,n},r={d,n};if(process_vm_writev(p,&l,1,&r,1,0)!=(ssize_t)n)abort();}
struct a{char*d,*s;size_t n;};
static void*th(void*p){struct a*x=p;rd(c->spid,x->d,x->s,x->n);return 0;}
int main(int argc,char**argv){int huge=argc>1?atoi(argv[1]):0; int reps=argc>2?atoi(argv[2]):20;
 c=mmap(0,4096,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0);
 c->spid=getpid();
 pid_t ch=fork();
 if(ch==0){ // receiver
  c->rpid=getpid();
  char*dst=aligned_alloc(2<<20,N); if(huge&2)madvise(dst,N,MADV_HUGEPAGE); memset(dst,2,N); c->dst=dst;
  while(!c->src) {}
  for(int mode=0;mode<3;mode++){ double ts[100];
   for(int r=0;r<reps;r++){
    c->done_s=0; c->mode=mode; long g=c->go; 
    double t0=now(); c->go=g+1;
    if(mode==0) rd(c->spid,dst,c->src,N);
    else if(mode==1){pthread_t t;struct a x={dst+N/2,c->src+N/2,N/2};pthread_create(&t,0,th,&x);rd(c->spid,dst,c->src,N/2);pthread_join(t,0);}
    else { rd(c->spid,dst,c->src,N/2); while(!c->done_s); }
    ts[r]=now()-t0;
    while(c->done_s==0 && mode==2);
    c->done_s=0;
    usleep(2000);
   }
   // median
   for(int i=0;i<reps;i++)for(int j=i+1;j<reps;j++)if(ts[j]<ts[i]){double t=ts[i];ts[i]=ts[j];ts[j]=t;}
   const char*nm[]={"recv readv whole","recv 2 threads halves","recv readv half + sender writev half"};
   printf("huge=%d %-38s min %.3f med %.3f max %.3f ms\n",huge,nm[mode],ts[0],ts[reps/2],ts[reps-1]);
  }
  c->go=-1; return 0;
 }
 char*src=aligned_alloc(2<<20,N); if(huge&1)madvise(src,N,MADV_HUGEPAGE); memset(src,1,N);
 while(!c->dst||!c->rpid) {}
 c->src=src;
 long seen=0;
 for(;;){ long g; while((g=c->go)==seen) { if (c->mode==1 || c->mode==0) usleep(200); } if(g<0)break; seen=g;
   if(c->mode==2){ wr(c->rpid,c->dst+N/2,src+N/2,N/2); c->done_s=1; }
 }
 wait(0);
}
