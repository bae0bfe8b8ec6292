/* SPDX-License-Identifier: MIT */
/*
 * A C++ workload for test_cxx.sh, run with and without the preload: the outputs must match.
 * libstdc++ reaches the allocator through operator new/delete (malloc/free) and, for over-aligned
 * types, aligned new (aligned_alloc) and aligned delete (free); exceptions are allocated by
 * __cxa_allocate_exception (malloc). Four threads build containers and hand strings to each other
 * through a queue, so that objects are freed by a thread other than the one that allocated them.
 * Checks that do not depend on the allocator (alignment, contents) exit 1 on failure.
 */
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <future>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace
{

int failures;

void check(bool ok, const char *what)
{
	if (!ok) {
		std::fprintf(stderr, "prog_cxx: check failed: %s\n", what);
		failures++;
	}
}

struct alignas(128) Wide {
	double v[16];
};

uint32_t next_rand(uint32_t &s)
{
	s = s * 1664525u + 1013904223u;
	return s >> 8;
}

std::string make_word(uint32_t &s)
{
	std::string w;
	unsigned len = 1 + next_rand(s) % 40; /* past the small-string buffer half the time */
	for (unsigned i = 0; i < len; i++)
		w.push_back(static_cast<char>('a' + next_rand(s) % 7));
	return w;
}

/* A queue of strings: producers allocate them, another thread consumes and frees them. */
class Mailbox
{
      public:
	void put(std::unique_ptr<std::string> s)
	{
		std::lock_guard<std::mutex> g(lock_);
		q_.push_back(std::move(s));
		cv_.notify_one();
	}
	std::unique_ptr<std::string> take()
	{
		std::unique_lock<std::mutex> g(lock_);
		cv_.wait(g, [this] { return !q_.empty(); });
		auto s = std::move(q_.front());
		q_.pop_front();
		return s;
	}

      private:
	std::mutex lock_;
	std::condition_variable cv_;
	std::deque<std::unique_ptr<std::string>> q_;
};

struct ThreadResult {
	std::map<std::string, unsigned> freq;
	uint64_t received_chars = 0;
	unsigned caught = 0;
};

void worker(unsigned id, Mailbox *boxes, unsigned nthreads, ThreadResult *out)
{
	uint32_t seed = 1000 + id;
	std::unordered_map<std::string, unsigned> local;
	const unsigned n = 40000;
	for (unsigned i = 0; i < n; i++) {
		std::string w = make_word(seed);
		local[w]++;
		if (i % 10 == 0)
			boxes[(id + 1) % nthreads].put(std::make_unique<std::string>(w + w));
		if (i % 997 == 0) {
			try {
				throw std::runtime_error("word " + w + std::string(200, 'x'));
			} catch (const std::exception &e) {
				out->caught += std::string(e.what()).size() > 200;
			}
		}
	}
	for (unsigned i = 0; i < n / 10; i++)
		out->received_chars += boxes[id].take()->size();
	for (auto &kv : local)
		out->freq[kv.first] += kv.second;
}

int aligned_news()
{
	int sum = 0;
	for (std::size_t al = 64; al <= 4096; al *= 2) {
		for (std::size_t size : { 1ul, 63ul, 64ul, 1000ul, 70000ul }) {
			void *p = ::operator new(size, std::align_val_t(al));
			check(reinterpret_cast<uintptr_t>(p) % al == 0, "aligned operator new");
			static_cast<unsigned char *>(p)[size - 1] = 1;
			::operator delete(p, std::align_val_t(al));
			sum++;
		}
	}
	char *c = new (std::align_val_t(64)) char[100];
	check(reinterpret_cast<uintptr_t>(c) % 64 == 0, "new (align_val_t(64)) char[]");
	std::fill(c, c + 100, 'z');
	::operator delete[](c, std::align_val_t(64));

	std::vector<Wide> wides(1000);
	check(reinterpret_cast<uintptr_t>(wides.data()) % 128 == 0, "vector<alignas(128)>");
	auto w = std::make_unique<Wide[]>(33);
	check(reinterpret_cast<uintptr_t>(w.get()) % 128 == 0, "make_unique<alignas(128)[]>");
	for (int i = 0; i < 500; i++) {
		auto one = std::make_shared<Wide>();
		check(reinterpret_cast<uintptr_t>(one.get()) % 128 == 0,
		      "make_shared<alignas(128)>");
		one->v[i % 16] = i;
		wides[static_cast<std::size_t>(i)].v[0] = one->v[i % 16];
	}
	double total = 0;
	for (auto &x : wides)
		total += x.v[0];
	std::printf("aligned: %d operator new sizes, wides total %.0f\n", sum, total);
	return 0;
}

void exceptions()
{
	unsigned caught = 0;
	for (int i = 0; i < 2000; i++) {
		try {
			std::vector<int> v(static_cast<std::size_t>(i % 50));
			(void)v.at(static_cast<std::size_t>(i % 70));
		} catch (const std::out_of_range &) {
			caught++;
		}
	}
	/* An exception thrown in one thread and rethrown in another. */
	auto fut = std::async(std::launch::async, [] {
		throw std::length_error(std::string(5000, 'e'));
		return 0;
	});
	std::size_t len = 0;
	try {
		fut.get();
	} catch (const std::length_error &e) {
		len = std::string(e.what()).size();
	}
	check(len == 5000, "exception across threads");
	std::printf("exceptions: %u out_of_range, cross-thread message %zu\n", caught, len);
}

void containers()
{
	uint32_t seed = 7;
	std::vector<std::string> words;
	for (int i = 0; i < 100000; i++)
		words.push_back(make_word(seed));
	std::sort(words.begin(), words.end());
	auto uniq = words;
	uniq.erase(std::unique(uniq.begin(), uniq.end()), uniq.end());
	std::list<std::vector<int>> lists;
	for (int i = 0; i < 2000; i++)
		lists.emplace_back(static_cast<std::size_t>(i % 300), i);
	lists.remove_if([](const std::vector<int> &v) { return v.size() % 3 == 0; });
	std::size_t cells = 0;
	for (auto &v : lists)
		cells += v.size();
	std::string big;
	for (int i = 0; i < 20000; i++)
		big += words[static_cast<std::size_t>(i)];
	big.shrink_to_fit();
	std::printf(
	    "containers: %zu words, %zu unique, first %s, last %s, list cells %zu, big %zu\n",
	    words.size(), uniq.size(), words.front().c_str(), words.back().c_str(), cells,
	    big.size());
}

} // namespace

int main()
{
	containers();
	exceptions();
	aligned_news();

	const unsigned nthreads = 4;
	Mailbox boxes[nthreads];
	ThreadResult results[nthreads];
	std::vector<std::thread> threads;
	for (unsigned i = 0; i < nthreads; i++)
		threads.emplace_back(worker, i, boxes, nthreads, &results[i]);
	for (auto &t : threads)
		t.join();
	std::map<std::string, unsigned> all;
	uint64_t received = 0;
	unsigned caught = 0;
	for (auto &r : results) {
		for (auto &kv : r.freq)
			all[kv.first] += kv.second;
		received += r.received_chars;
		caught += r.caught;
	}
	auto top = std::max_element(all.begin(), all.end(), [](const auto &a, const auto &b) {
		return a.second < b.second || (a.second == b.second && a.first > b.first);
	});
	uint64_t total = std::accumulate(all.begin(), all.end(), uint64_t{ 0 },
					 [](uint64_t s, const auto &kv) { return s + kv.second; });
	check(total == 4 * 40000, "every word counted");
	std::printf(
	    "threads: %zu distinct, total %llu, top %s x%u, received %llu chars, caught %u\n",
	    all.size(), static_cast<unsigned long long>(total), top->first.c_str(), top->second,
	    static_cast<unsigned long long>(received), caught);
	return failures == 0 ? 0 : 1;
}
